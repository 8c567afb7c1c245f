package ui

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestTable(t *testing.T) {
	var b bytes.Buffer
	Table(&b, []string{"HOST", "ZONE", "ACTION"}, [][]string{{"cp-a", "az-a", "created"}, {"etcd-long", "b", "unchanged"}})
	want := "HOST       ZONE  ACTION\ncp-a       az-a  created\netcd-long  b     unchanged\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestPrinter(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, false, false)
	p.PhaseStarted("etcd/install")
	p.Hostf("cp-a", "uploaded %d files", 3)
	p.Debugf("hidden")
	p.PhaseDone("etcd/install", 1500*time.Millisecond, nil, "")
	p.PhaseDone("etcd/start", 0, errors.New("x"), "")
	p.PhaseDone("etcd/wait", 0, nil, "nothing to do")
	want := "[etcd/install]\n  cp-a:      uploaded 3 files\n[etcd/install] ✓ 1.5s\n[etcd/start] ✗ failed after 0s\n[etcd/wait] - skipped: nothing to do\n"
	if b.String() != want {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	q := New(&b, false, true)
	q.Infof("x")
	q.Warnf("careful")
	if b.String() != "WARNING: careful\n" {
		t.Fatalf("quiet printer wrote %q", b.String())
	}
}

func TestPrinterLog(t *testing.T) {
	var out, log bytes.Buffer
	p := New(&out, false, false)
	p.SetLog(&log)
	p.Infof("shown")
	p.Debugf("only in the log")
	if out.String() != "shown\n" {
		t.Fatalf("out %q", out.String())
	}
	if !bytes.Contains(log.Bytes(), []byte("Z shown\n")) || !bytes.Contains(log.Bytes(), []byte("debug: only in the log")) {
		t.Fatalf("log %q", log.String())
	}
}
