package state

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "st")
	if c, err := Load(dir); c != nil || err != nil {
		t.Fatalf("Load of missing state = %v, %v", c, err)
	}
	want := &Cluster{Name: "lab", Token: "lab-1", Members: map[string]*Member{"cp-a": {InitialCluster: "cp-a=https://10.0.0.1:2380", InitialClusterState: "new"}}}
	if err := Save(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v want %+v", got, want)
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v err %v", st.Mode(), err)
	}
	if d, _ := os.Stat(dir); d.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", d.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("leftover temp files: %v", entries)
	}
}

func TestLoadCorrupt(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileName), []byte("{"), 0o600)
	if _, err := Load(dir); err == nil {
		t.Fatal("corrupt state loaded")
	}
}

func TestForgetRemoved(t *testing.T) {
	dir := t.TempDir()
	if err := ForgetRemoved(dir, map[string]string{"cp-a": "1"}); err != nil {
		t.Fatalf("no record: %v", err)
	}
	c := &Cluster{Name: "c", Token: "t", Members: map[string]*Member{
		"cp-a": {ID: "8e9e05c52164694d"}, "cp-b": {ID: "aa"}, "cp-c": {}, "cp-d": {ID: "cc"},
	}}
	if err := Save(dir, c); err != nil {
		t.Fatal(err)
	}
	// cp-a by its ID (any case), cp-c never had one; cp-b has re-joined under another ID since.
	if err := ForgetRemoved(dir, map[string]string{"cp-a": "8E9E05C52164694D", "cp-b": "bb", "cp-c": "dd"}); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Members["cp-a"] != nil || got.Members["cp-c"] != nil || got.Members["cp-b"] == nil || got.Members["cp-d"] == nil || got.Token != "t" {
		t.Fatalf("after forgetting: %+v", got.Members)
	}
}
