package ui

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTable(t *testing.T) {
	for _, c := range []struct {
		name   string
		header []string
		rows   [][]string
		want   string
	}{
		{"columns as wide as the widest cell plus two spaces", []string{"HOST", "ZONE", "ACTION"},
			[][]string{{"cp-a", "az-a", "created"}, {"etcd-long", "b", "unchanged"}},
			"HOST       ZONE  ACTION\ncp-a       az-a  created\netcd-long  b     unchanged\n"},
		{"widths in runes, not bytes", []string{"A", "B"}, [][]string{{"✓ ok", "x"}, {"日本", "y"}},
			"A     B\n✓ ok  x\n日本    y\n"},
		{"no trailing blanks after empty last cells, short rows", []string{"FILE", "LEFT", ""},
			[][]string{{"ca.crt", "", ""}, {"peer.crt"}, {"x", "30d", "WARN"}},
			"FILE      LEFT\nca.crt\npeer.crt\nx         30d   WARN\n"},
		{"an empty column is two spaces wide", []string{"A", "", "C"}, [][]string{{"1", "", "3"}},
			"A    C\n1    3\n"},
		{"leading blanks kept (indented sub-tables)", []string{"  NAME", "ID"}, [][]string{{"  cp-a", "8e9e"}},
			"  NAME  ID\n  cp-a  8e9e\n"},
		{"a tab in a cell is text, not a column", []string{"A", "B"}, [][]string{{"x\ty", "z"}},
			"A    B\nx\ty  z\n"},
		{"header only", []string{"MEMBER", "ROLE"}, nil, "MEMBER  ROLE\n"},
	} {
		var b bytes.Buffer
		Table(&b, c.header, c.rows)
		if b.String() != c.want {
			t.Errorf("%s: got\n%q\nwant\n%q", c.name, b.String(), c.want)
		}
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

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 320 << 20: "320.0 MiB", 1 << 30: "1.0 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestQuiet: a Quiet printer writes only warnings to the terminal and every line to the log.
func TestQuiet(t *testing.T) {
	var out, log bytes.Buffer
	p := New(&out, false, false)
	p.SetLog(&log)
	q := p.Quiet()
	q.Infof("info line")
	q.Hostf("cp-a", "host line")
	q.PhaseStarted("preflight")
	q.PhaseDone("preflight", time.Second, nil, "")
	q.Warnf("careful")
	if got := out.String(); got != "WARNING: careful\n" {
		t.Errorf("terminal: %q, want the warning only", got)
	}
	for _, want := range []string{"info line", "cp-a:", "host line", "[preflight]", "[preflight] ✓", "WARNING: careful"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}
