package workload

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// storeOf returns the store a correct etcd would hold after r: every acked write at its revision.
func storeOf(r *Record) map[string]storedKV {
	s := map[string]storedKV{}
	for _, w := range r.Writes {
		if w.Acked {
			s[w.Key] = storedKV{value: w.Value, modRevision: w.Revision}
		}
	}
	return s
}

func kindsOf(v *Verification) []Kind {
	var out []Kind
	for _, x := range v.Violations {
		out = append(out, x.Kind)
	}
	return out
}

func TestCheckHealthy(t *testing.T) {
	r := fabricated()
	r.Reads = r.Reads[:2] // the OK and the failed read
	store := storeOf(r)
	store[key(5)] = storedKV{value: value(5), modRevision: 13} // failed write 5 was applied anyway
	store["/hactl-drill/t/stray"] = storedKV{value: "x", modRevision: 3}
	v := check(r, store, 20)
	want := Verification{
		Prefix: r.Prefix, Revision: 20, Keys: 8, Writes: 8, Acked: 6, Intact: 6, Reads: 2,
		CommittedUnacked: 1, UnackedAbsent: 1, Foreign: 1, ForeignKeys: []string{"/hactl-drill/t/stray"},
		Summary: v.Summary,
	}
	if !v.OK() || len(v.Violations) != 0 || v.Foreign != 1 || v.ForeignKeys[0] != want.ForeignKeys[0] {
		t.Fatalf("healthy record: %+v", v)
	}
	if !reflect.DeepEqual(*v, want) {
		t.Errorf("healthy record\n got %+v\nwant %+v", *v, want)
	}
	if s := v.Summary; !strings.HasPrefix(s, "ok: all 6 acknowledged writes") || !strings.Contains(s, "2 writes not acknowledged (1 committed anyway)") ||
		!strings.Contains(s, "1 keys under /hactl-drill/t/ not written by this run") {
		t.Errorf("summary: %s", s)
	}
}

func TestCheckFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(r *Record, store map[string]storedKV)
		counts func(v *Verification) bool
		kinds  []Kind
		detail string
	}{
		{
			name:   "lost",
			edit:   func(r *Record, store map[string]storedKV) { delete(store, key(7)) },
			counts: func(v *Verification) bool { return v.Lost == 1 && v.Intact == 5 },
			kinds:  []Kind{KindLost},
			detail: "write 7 (/hactl-drill/t/0000000007) acknowledged at revision 15 is not in the store",
		},
		{
			name:   "mismatched revision",
			edit:   func(r *Record, store map[string]storedKV) { store[key(2)] = storedKV{value: value(2), modRevision: 17} },
			counts: func(v *Verification) bool { return v.Mismatched == 1 && v.Foreign == 0 },
			kinds:  []Kind{KindMismatch},
			detail: "at mod revision 17",
		},
		{
			name:   "mismatched value",
			edit:   func(r *Record, store map[string]storedKV) { store[key(2)] = storedKV{value: "other", modRevision: 11} },
			counts: func(v *Verification) bool { return v.Mismatched == 1 && v.Foreign == 0 },
			kinds:  []Kind{KindMismatch},
			detail: `with value "other"`,
		},
		{
			// Writes 6 and 7 were concurrent (neither acked before the other was sent): only the
			// shared revision is wrong.
			name: "split brain",
			edit: func(r *Record, store map[string]storedKV) {
				r.Writes[6].Revision = 14
				store[key(7)] = storedKV{value: value(7), modRevision: 14}
			},
			counts: func(v *Verification) bool { return v.SplitBrain == 1 && v.OrderViolations == 0 && v.Lost == 0 },
			kinds:  []Kind{KindSplitBrain},
			detail: "revision 14 acknowledged to 2 writes: /hactl-drill/t/0000000006, /hactl-drill/t/0000000007",
		},
		{
			// Write 8 was sent (1040) after write 7 was acked (1025) but got a lower revision.
			name: "real-time order",
			edit: func(r *Record, store map[string]storedKV) {
				r.Writes[7].Revision = 13
				store[key(8)] = storedKV{value: value(8), modRevision: 13}
			},
			counts: func(v *Verification) bool { return v.OrderViolations == 1 && v.SplitBrain == 0 },
			kinds:  []Kind{KindOrder},
			detail: "write 8 (/hactl-drill/t/0000000008) acknowledged at revision 13, yet write 7 (/hactl-drill/t/0000000007) was acknowledged at revision 15 before it was sent",
		},
		{
			// Failed write 5 (sent at 120) committed below write 3 (acked at 60, revision 12).
			name:   "real-time order of a committed unacknowledged write",
			edit:   func(r *Record, store map[string]storedKV) { store[key(5)] = storedKV{value: value(5), modRevision: 9} },
			counts: func(v *Verification) bool { return v.OrderViolations == 1 && v.CommittedUnacked == 1 },
			kinds:  []Kind{KindOrder},
			detail: "committed (unacknowledged) at revision 9",
		},
		{
			name:   "stale reads",
			edit:   func(r *Record, store map[string]storedKV) {},
			counts: func(v *Verification) bool { return v.StaleReads == 2 && v.Reads == 4 },
			kinds:  []Kind{KindStaleRead, KindStaleRead},
			detail: "did not find it",
		},
		{
			name: "several at once, listed by kind",
			edit: func(r *Record, store map[string]storedKV) {
				delete(store, key(1))
				r.Writes[7].Revision = 13
				store[key(8)] = storedKV{value: value(8), modRevision: 13}
			},
			counts: func(v *Verification) bool { return v.Lost == 1 && v.OrderViolations == 1 && v.StaleReads == 2 },
			kinds:  []Kind{KindLost, KindOrder, KindStaleRead, KindStaleRead},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fabricated()
			if tc.name != "stale reads" && !strings.HasPrefix(tc.name, "several") {
				r.Reads = r.Reads[:2]
			}
			store := storeOf(r)
			tc.edit(r, store)
			v := check(r, store, 30)
			if v.OK() {
				t.Fatalf("OK: %+v", v)
			}
			if !tc.counts(v) {
				t.Errorf("counts: %+v", v)
			}
			if got := kindsOf(v); strings.Join(kindStrings(got), ",") != strings.Join(kindStrings(tc.kinds), ",") {
				t.Errorf("violations %v, want %v: %v", got, tc.kinds, v.Violations)
			}
			if tc.detail != "" && !strings.Contains(v.Violations[0].Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", v.Violations[0].Detail, tc.detail)
			}
			if s := v.Summary; !strings.HasPrefix(s, "FAILED: ") {
				t.Errorf("summary: %s", s)
			}
		})
	}
}

func kindStrings(ks []Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

func TestCheckCapsLists(t *testing.T) {
	r := &Record{Prefix: "/hactl-drill/t/"}
	for i := range 25 {
		r.Writes = append(r.Writes, acked(int64(i+1), i*20, i*20+5, int64(100+i)))
	}
	store := map[string]storedKV{}
	for i := range 30 {
		store[key(int64(1000+i))] = storedKV{value: "x", modRevision: 1}
	}
	v := check(r, store, 200)
	if v.Lost != 25 || len(v.Violations) != MaxListed || v.Foreign != 30 || len(v.ForeignKeys) != MaxListed {
		t.Errorf("lost %d listed %d foreign %d listed %d", v.Lost, len(v.Violations), v.Foreign, len(v.ForeignKeys))
	}
	if v.Violations[0].Seq != 1 || v.ForeignKeys[0] != key(1000) {
		t.Errorf("lists not in order: %v %v", v.Violations[0], v.ForeignKeys[0])
	}
}

func TestVerificationJSON(t *testing.T) {
	r := fabricated()
	store := storeOf(r)
	delete(store, key(1))
	v := check(r, store, 30)
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"ok":false`, `"summary":"FAILED: 1 lost`, `"lost":1`, `"staleReads":2`, `"kind":"lost"`, `"revision":30`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON lacks %s: %s", s, b)
		}
	}
	var back Verification
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Lost != 1 || back.OK() || len(back.Violations) != len(v.Violations) || back.Summary != v.Summary {
		t.Errorf("round trip: %+v", back)
	}
}
