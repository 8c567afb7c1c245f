package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

func TestPartSizeAndThreads(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		db          int64
		maxParts    int
		wantPart    int64
		wantThreads uint
	}{
		{0, 10000, minS3PartSize, 1},                  // an empty DB: S3's smallest part
		{3 * mib, 10000, minS3PartSize, 1},            // 3.3 MiB: still 5 MiB
		{5 * mib, 10000, 6 * mib, 1},                  // 5.5 MiB: one part as large as the stream, not 8 MiB
		{7 * mib, 10000, MinPartSize, 1},              // 7.7 MiB: rounds up to 8 MiB, one part
		{8 * mib, 10000, MinPartSize, 2},              // 8.8 MiB: two parts of 8 MiB
		{20 * mib, 10000, MinPartSize, 3},             // 22 MiB: three
		{8 << 30, 10000, MinPartSize, DefaultThreads}, // 8 GiB: many parts, DefaultThreads in flight
		{8 << 30, 100, 181 * mib, DefaultThreads},     // a store with few parts: larger parts
		{100 * mib, 4, 55 * mib, 2},                   // 110 MiB in at most 2 parts of 55 MiB
	} {
		ps, err := PartSize(tc.db, tc.maxParts)
		if err != nil {
			t.Fatalf("PartSize(%d, %d): %v", tc.db, tc.maxParts, err)
		}
		if ps != tc.wantPart {
			t.Errorf("PartSize(%d, %d) = %d MiB, want %d MiB", tc.db, tc.maxParts, ps/mib, tc.wantPart/mib)
		}
		if got := Threads(tc.db, ps); got != tc.wantThreads {
			t.Errorf("Threads(%d MiB, %d MiB) = %d, want %d", tc.db/mib, ps/mib, got, tc.wantThreads)
		}
	}
	if _, err := PartSize(1<<50, 10000); err == nil {
		t.Error("PartSize of 1 PiB in 10000 parts: no error, want one (parts over 5 GiB)")
	}
	if _, err := PartSize(mib, 1); err == nil {
		t.Error("PartSize with a part limit of 1: no error")
	}
}

// TestSnapshotDigest: one pass gives the whole stream's sha256 and that of all but its last 32
// bytes, whatever the write sizes (writes shorter than the held-back tail included).
func TestSnapshotDigest(t *testing.T) {
	data := make([]byte, 3*512+sha256.Size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	wantWhole, wantBody := sha256.Sum256(data), sha256.Sum256(data[:len(data)-sha256.Size])
	for _, sizes := range [][]int{{len(data)}, {1}, {31}, {32}, {33}, {5, 40, 1, 100}, {1000, 3, 3, 3}} {
		d := newSnapshotDigest()
		for off, i := 0, 0; off < len(data); i++ {
			n := min(sizes[i%len(sizes)], len(data)-off)
			d.Write(data[off : off+n])
			off += n
		}
		whole, body := d.sums()
		if whole != hex.EncodeToString(wantWhole[:]) || body != hex.EncodeToString(wantBody[:]) {
			t.Errorf("writes of %v: whole %s body %s, want %x %x", sizes, whole, body, wantWhole, wantBody)
		}
		if err := d.checkTrailer(body); !errors.Is(err, ErrTrailer) {
			t.Errorf("writes of %v: trailer check of data that does not end with its sha256: %v, want ErrTrailer", sizes, err)
		}
	}
	snap := append(data[:len(data)-sha256.Size:len(data)-sha256.Size], wantBody[:]...)
	d := newSnapshotDigest()
	d.Write(snap[:700])
	d.Write(snap[700:])
	if _, body := d.sums(); d.checkTrailer(body) != nil {
		t.Errorf("a DB followed by its sha256: %v", d.checkTrailer(body))
	}
}
