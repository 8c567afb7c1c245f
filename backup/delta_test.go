package backup

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestEventsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewEventWriter(&buf)
	in := []*mvccpb.Event{
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("/registry/pods/a"), Value: []byte("v1"), CreateRevision: 5, ModRevision: 5, Version: 1, Lease: 7}},
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("/registry/pods/a"), Value: bytes.Repeat([]byte("x"), 300), CreateRevision: 5, ModRevision: 6, Version: 2}},
		{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("/registry/pods/a"), ModRevision: 7}},
	}
	for _, ev := range in {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if w.Count() != 3 {
		t.Errorf("count %d", w.Count())
	}
	raw := buf.Bytes()
	r := NewEventReader(bytes.NewReader(raw))
	for i, want := range in {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.Type != want.Type || !bytes.Equal(got.Kv.Key, want.Kv.Key) || !bytes.Equal(got.Kv.Value, want.Kv.Value) ||
			got.Kv.ModRevision != want.Kv.ModRevision || got.Kv.Lease != want.Kv.Lease || got.Kv.Version != want.Kv.Version {
			t.Errorf("event %d: got %v, want %v", i, got, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}
	// Cut anywhere inside a record: ErrBadEvents, never a silent short read.
	for _, cut := range []int{1, 5, len(raw) - 1} {
		r := NewEventReader(bytes.NewReader(raw[:cut]))
		var err error
		for err == nil {
			_, err = r.Next()
		}
		if !errors.Is(err, ErrBadEvents) {
			t.Errorf("events cut at %d of %d bytes: %v, want ErrBadEvents", cut, len(raw), err)
		}
	}
	if _, err := NewEventReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0x7f})).Next(); !errors.Is(err, ErrBadEvents) {
		t.Errorf("an implausible length: %v", err)
	}
}

func delta(from, to int64) Delta {
	return Delta{Stem: "x", Metadata: &DeltaMetadata{FromRevision: from, ToRevision: to}}
}

func TestChain(t *testing.T) {
	stems := func(ds []Delta) [][2]int64 {
		var out [][2]int64
		for _, d := range ds {
			out = append(out, [2]int64{d.Metadata.FromRevision, d.Metadata.ToRevision})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		deltas []Delta
		base   int64
		want   [][2]int64
		gap    *GapError
	}{
		{"contiguous from the base", []Delta{delta(20, 30), delta(10, 20), delta(30, 45)}, 10, [][2]int64{{10, 20}, {20, 30}, {30, 45}}, nil},
		{"older deltas skipped, one straddling the base used", []Delta{delta(1, 5), delta(5, 12), delta(12, 30)}, 8, [][2]int64{{5, 12}, {12, 30}}, nil},
		{"an overlap (two writers) is kept, the covered one dropped", []Delta{delta(10, 20), delta(15, 25), delta(10, 14)}, 10, [][2]int64{{10, 20}, {15, 25}}, nil},
		{"nothing past the base", []Delta{delta(1, 5)}, 9, nil, nil},
		{"a gap after the base", []Delta{delta(10, 20), delta(22, 30)}, 10, nil, &GapError{From: 20, To: 22}},
		{"the first delta starts after the base", []Delta{delta(12, 20)}, 10, nil, &GapError{From: 10, To: 12}},
	} {
		got, err := Chain(tc.deltas, tc.base)
		var ge *GapError
		switch {
		case tc.gap != nil:
			if !errors.As(err, &ge) || *ge != *tc.gap {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.gap)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case len(got) != len(tc.want) || (len(got) > 0 && !equalPairs(stems(got), tc.want)):
			t.Errorf("%s: chain %v, want %v", tc.name, stems(got), tc.want)
		}
	}
	if msg := (&GapError{From: 20, To: 22}).Error(); !bytes.Contains([]byte(msg), []byte("revisions 21 to 22")) {
		t.Errorf("gap message %q does not name the missing revisions", msg)
	}
}

func equalPairs(a, b [][2]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDeltaNames(t *testing.T) {
	data, meta, err := DeltaKeys("p", "lab", 100, 250, "zstd", true)
	if err != nil || data != "p/lab/deltas/rev000000000000100-rev000000000000250.events.zst.age" || meta != "p/lab/deltas/rev000000000000100-rev000000000000250.json" {
		t.Errorf("DeltaKeys: %s %s %v", data, meta, err)
	}
	if f, to, ok := parseDeltaStem("rev000000000000100-rev000000000000250"); !ok || f != 100 || to != 250 {
		t.Errorf("parseDeltaStem: %d %d %v", f, to, ok)
	}
	for _, bad := range [][2]int64{{5, 5}, {-1, 3}, {9, 2}} {
		if _, err := DeltaStem(bad[0], bad[1]); err == nil {
			t.Errorf("DeltaStem(%d, %d): no error", bad[0], bad[1])
		}
	}
}
