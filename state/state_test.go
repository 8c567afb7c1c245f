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
