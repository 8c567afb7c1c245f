package replay_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/agent"
	"github.com/hactl/hactl/backup/replay"
	"github.com/hactl/hactl/backup/s3test"
	"github.com/hactl/hactl/specload"
)

// member is an embedded etcd on loopback and a client of it.
type member struct {
	e   *embed.Etcd
	cli *clientv3.Client
	url string
}

func freeURL(t *testing.T) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// start runs etcd on dataDir (restored by etcdutl when restored is set).
func start(t *testing.T, dataDir string, peer url.URL) *member {
	t.Helper()
	client := freeURL(t)
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "m0", dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = "m0=" + peer.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &member{e: e, cli: cli, url: client.String()}
}

// dump returns every key's value at revision rev (0: the current one).
func dump(t *testing.T, cli *clientv3.Client, rev int64) map[string]string {
	t.Helper()
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cli.Get(context.Background(), "\x00", opts...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// newStore starts a real MinIO (s3test) and returns the store on its bucket.
func newStore(t *testing.T) *backup.S3 {
	t.Helper()
	srv := s3test.Start(t)
	store, err := backup.NewS3(backup.S3Config{Endpoint: srv.Endpoint, Bucket: s3test.Bucket, Region: s3test.Region, Lookup: v1alpha1.BucketLookupPath,
		PlainHTTP: true, Credentials: specload.BackupCredentials{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestAgentAndReplay: the agent (elected through the real election API) writes deltas while
// puts, deletes and multi-key transactions run; a second agent takes over when the first stops; a
// compaction past the chain's end makes the writer take a full snapshot. Replaying the chain onto
// the full snapshot gives exactly the source's keys at the last delta's revision, and a missing
// delta is refused naming the revisions.
func TestAgentAndReplay(t *testing.T) {
	store := newStore(t)
	src := start(t, filepath.Join(t.TempDir(), "src"), freeURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range 20 {
		if _, err := src.cli.Put(ctx, fmt.Sprintf("/registry/base/%02d", i), "v0"); err != nil {
			t.Fatal(err)
		}
	}
	// A key with a short Lease (kept alive here) in the full snapshot: the replay must keep it alive
	// too, or its expiry would add revisions the chain does not have. 5 s, not etcd's minimum
	// (about 2 s): under make unit's -race on two busy cores, the temporary etcd's start up to the
	// first keep-alive once took longer than 2 s plus a new leader's extension (CI at afea5db).
	short, err := src.cli.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := src.cli.KeepAlive(ctx, short.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()
	if _, err := src.cli.Put(ctx, "/registry/leased/a", "short", clientv3.WithLease(short.ID)); err != nil {
		t.Fatal(err)
	}
	full := func(ctx context.Context) (int64, error) {
		m, err := backup.Take(ctx, src.cli, src.url, store, backup.TakeOptions{Cluster: "lab", Member: "m0", Compression: "zstd"})
		if err != nil {
			return 0, err
		}
		return m.Revision, nil
	}
	var logMu sync.Mutex
	var logs []string
	runAgent := func(ctx context.Context, id string) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = agent.Run(ctx, agent.Options{Cluster: "lab", Compression: "zstd", Store: store, Client: src.cli, Identity: id,
				DeltaEvery: 300 * time.Millisecond, SessionTTL: 2, FullSnapshot: full,
				Logf: func(f string, a ...any) {
					logMu.Lock()
					logs = append(logs, id+": "+fmt.Sprintf(f, a...))
					logMu.Unlock()
				}})
		}()
		return done
	}
	ctxA, stopA := context.WithCancel(ctx)
	doneA := runAgent(ctxA, "agent-a")
	time.Sleep(500 * time.Millisecond)
	ctxB, stopB := context.WithCancel(ctx)
	doneB := runAgent(ctxB, "agent-b")
	defer func() { stopB(); <-doneB }()

	write := func(round int) {
		for i := range 30 {
			k := fmt.Sprintf("/registry/r%d/%02d", round, i)
			if _, err := src.cli.Put(ctx, k, fmt.Sprintf("v%d", i)); err != nil {
				t.Fatal(err)
			}
			if i%7 == 0 {
				if _, err := src.cli.Delete(ctx, fmt.Sprintf("/registry/base/%02d", (round*7+i)%20)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := src.cli.Txn(ctx).Then(clientv3.OpPut(fmt.Sprintf("/registry/txn/%d/a", round), "x"), clientv3.OpPut(fmt.Sprintf("/registry/txn/%d/b", round), "y"),
			clientv3.OpDelete(fmt.Sprintf("/registry/r%d/03", round))).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	// A Lease granted after the full snapshot: the replay grants it with its ID.
	later, err := src.cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.cli.Put(ctx, "/registry/leased/b", "later", clientv3.WithLease(later.ID)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	stopA() // agent-a was elected first: agent-b takes over
	<-doneA
	write(2)
	waitChain := func(want int64) []backup.Delta {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ds, err := backup.ListDeltas(ctx, store, "", "lab")
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) > 0 && ds[len(ds)-1].Metadata.ToRevision >= want {
				return ds
			}
			if time.Now().After(deadline) {
				t.Fatalf("no delta reached revision %d in 30s; logs:\n%s", want, strings.Join(logs, "\n"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	head, err := src.cli.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	target := head.Header.Revision
	ds := waitChain(target)
	writers := map[string]bool{}
	for _, d := range ds {
		writers[d.Metadata.Writer] = true
	}
	if !writers["agent-a"] || !writers["agent-b"] {
		t.Errorf("deltas written by %v, want both agents (a leader change)", writers)
	}

	l, err := backup.List(ctx, store, "", "lab")
	if err != nil || l.Latest() == nil {
		t.Fatalf("no full snapshot (the agent takes one when there is none): %v", err)
	}
	dir := t.TempDir()
	fullPath := filepath.Join(dir, "full.db")
	vr, err := backup.Verify(ctx, store, l.Latest(), backup.VerifyOptions{KeepAs: fullPath})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := backup.Chain(ds, vr.Revision)
	if err != nil {
		t.Fatal(err)
	}
	last := chain[len(chain)-1].Metadata.ToRevision
	slept := false
	res, err := replay.Run(ctx, replay.Options{Snapshot: fullPath, Revision: vr.Revision, Deltas: chain, Store: store,
		SkipPrefix: agent.ElectionPrefix("lab"), Out: filepath.Join(dir, "replayed.db"),
		Progress: func(string, ...any) {
			if !slept { // outlive the 5 s Lease (plus the TTL extension a new leader gives) in the temporary etcd
				slept = true
				time.Sleep(10 * time.Second)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision < last || res.Events == 0 {
		t.Errorf("replayed to revision %d with %d events, want at least %d", res.Revision, res.Events, last)
	}
	// Restore the result (as hactl restore does, without the bump) and compare with the source.
	out := filepath.Join(dir, "restored")
	peer := freeURL(t)
	if err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: res.Path, Name: "m0", OutputDataDir: out,
		PeerURLs: []string{peer.String()}, InitialCluster: "m0=" + peer.String(), InitialClusterToken: "t"}); err != nil {
		t.Fatal(err)
	}
	restored := start(t, out, peer)
	got := dump(t, restored.cli, 0)
	for _, k := range []string{"/registry/leased/a", "/registry/leased/b"} {
		r, err := restored.cli.Get(ctx, k)
		if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
			t.Errorf("%s after the replay: %v %v; want it with its Lease", k, r, err)
		}
	}
	want := dump(t, src.cli, last)
	for k := range want {
		if strings.HasPrefix(k, agent.ElectionPrefix("lab")) {
			delete(want, k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("replayed %d keys, the source had %d at revision %d", len(got), len(want), last)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: replayed %q, source %q", k, got[k], v)
		}
	}

	// A missing delta: Chain refuses, naming the revisions.
	if len(chain) >= 3 {
		holed := append(append([]backup.Delta{}, chain[:1]...), chain[2:]...)
		var ge *backup.GapError
		if _, err := backup.Chain(holed, vr.Revision); !errors.As(err, &ge) || ge.From != chain[0].Metadata.ToRevision {
			t.Errorf("a chain without %s: %v, want a gap after revision %d", chain[1].Stem, err, chain[0].Metadata.ToRevision)
		}
	}

	// Compaction past the chain's end while the writer is down: the next writer's watch hits it
	// and takes a full snapshot instead of leaving a gap.
	stopB()
	<-doneB
	write(3)
	cur, _ := src.cli.Get(ctx, "x")
	if _, err := src.cli.Compact(ctx, cur.Header.Revision); err != nil {
		t.Fatal(err)
	}
	fulls := len(l.Snapshots)
	ctxC, stopC := context.WithCancel(ctx)
	doneC := runAgent(ctxC, "agent-c")
	defer func() { stopC(); <-doneC }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l2, err := backup.List(ctx, store, "", "lab")
		if err != nil {
			t.Fatal(err)
		}
		if len(l2.Snapshots) > fulls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new full snapshot after the compaction; logs:\n%s", strings.Join(logs, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(strings.Join(logs, "\n"), "hit the compaction") {
		t.Errorf("the agent did not say why it took a full snapshot; logs:\n%s", strings.Join(logs, "\n"))
	}
	_ = os.Remove(res.Path)
}

// TestAgentsOneWriterAfterKeysDeleted: when the election's keys are deleted under the agents (a
// restore forgetting the restored election), the elected writer notices its key is gone and stops:
// after a moment a single agent writes the deltas again.
func TestAgentsOneWriterAfterKeysDeleted(t *testing.T) {
	store := newStore(t)
	src := start(t, filepath.Join(t.TempDir(), "src"), freeURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := func(ctx context.Context) (int64, error) {
		m, err := backup.Take(ctx, src.cli, src.url, store, backup.TakeOptions{Cluster: "lab", Member: "m0"})
		if err != nil {
			return 0, err
		}
		return m.Revision, nil
	}
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = agent.Run(actx, agent.Options{Cluster: "lab", Store: store, Client: src.cli, Identity: id,
				DeltaEvery: 200 * time.Millisecond, SessionTTL: 2, FullSnapshot: full})
		}()
	}
	defer func() { stop(); wg.Wait() }()
	put := func(n int) {
		for i := range n {
			if _, err := src.cli.Put(ctx, fmt.Sprintf("/k/%d", i), "v"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	put(50)
	if _, err := src.cli.Delete(ctx, agent.ElectionPrefix("lab"), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the old writer stops, the waiting agents elect one among themselves
	head, _ := src.cli.Get(ctx, "x")
	put(100)
	ds, err := backup.ListDeltas(ctx, store, "", "lab")
	if err != nil {
		t.Fatal(err)
	}
	writers := map[string]int{}
	for _, d := range ds {
		if d.Metadata.FromRevision > head.Header.Revision {
			writers[d.Metadata.Writer]++
		}
	}
	if len(writers) != 1 {
		t.Errorf("deltas after the election's keys were deleted written by %v, want exactly one writer", writers)
	}
}
