// Command backup is hactl's backup and restore benchmark (make bench; never run in CI). In the lab (3
// etcd members bootstrapped by hactl, the lab's MinIO object store) it fills etcd to each DB size
// (-sizes, MiB; -values random: 1 MiB random values, incompressible; -values k8s: Pod-shaped JSON
// objects of about 1 KiB under /registry/pods/, compressible as a Kubernetes etcd is) and measures,
// side by side:
//
//   - hactl backup now (compression none, and zstd): wall time and the hactl process's peak RSS
//     (getrusage of the child), against the two-step baseline: `etcdctl snapshot save` to a local
//     file, then the upload of that file (minio-go FPutObject, 4 parallel parts);
//   - hactl restore of the 3-member cluster from that file (--force --yes: verify here, ship to
//     every member, stop, etcdutl restore on each, start, wait) against one transfer of the file to
//     one member (ssh with the lab's key, `cat >` on the host) plus that member's `etcdutl snapshot
//     restore` of it on its host (same flags as hactl's).
//
// Goals (issues 5 and 18): backup ≤ 1.1 × etcdctl snapshot save alone (≤ 1.3 × with zstd), peak
// RSS ≤ 128 MiB whatever the DB size, 3-member restore ≤ 1.5 × (one transfer + one etcdutl
// restore). Figures are printed, not asserted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/bench/kit"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

func main() {
	hactl := flag.String("hactl", "bin/hactl", "hactl binary")
	sizes := flag.String("sizes", "256,1024", "DB sizes to measure, MiB, ascending")
	flag.StringVar(&valueKind, "values", "random", "what fills the DB: random (1 MiB random values) or k8s (Pod-shaped JSON objects)")
	keep := flag.Bool("keep", false, "leave the lab running afterwards")
	flag.Parse()
	if valueKind != "random" && valueKind != "k8s" {
		fmt.Fprintf(os.Stderr, "bench/backup: -values %q: want random or k8s\n", valueKind)
		os.Exit(2)
	}
	var mibs []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench/backup: -sizes %q: want MiB numbers like 256,1024\n", *sizes)
			os.Exit(2)
		}
		mibs = append(mibs, n)
	}
	if err := run(*hactl, mibs, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench/backup:", err)
		os.Exit(1)
	}
}

// Goals of issue 5.
const (
	goalBackupRatio  = 1.1
	goalPeakRSS      = 128 << 20
	goalRestoreRatio = 1.5
	mib              = 1 << 20
)

// measured is one size's figures.
type measured struct {
	dbSize                    int64
	save, upload              time.Duration // etcdctl snapshot save; FPutObject of its file
	backupNone, backupZstd    time.Duration // hactl backup now
	rssNone, rssZstd, rssSave int64         // peak RSS, bytes
	// cpu: each run's own CPU seconds; busy: how busy the machine's CPUs were meanwhile (0..1).
	cpuSave, cpuNone, cpuZstd    float64
	busySave, busyNone, busyZstd float64
	ioSave, ioNone, ioZstd       float64 // iowait share meanwhile
	storedNone, storedZstd       int64
	restore3, restore1           time.Duration // hactl restore (3 members); etcdutl restore on one host
	transfer                     time.Duration // the file copied to one host over SSH
	// transfer3 and restore3x: the same copy to the three members at once, then their three
	// etcdutl restores at once (the slowest): the lab's floor, its hosts sharing one disk.
	transfer3, restore3x time.Duration
	restorePhases        string        // hactl restore's progress lines with their times
	restoreData          time.Duration // hactl's restore/data phase: etcdutl restore on the 3 members in parallel
	// hactl restore --from latest: every member fetches the backup from MinIO itself (compression
	// none, zstd), and the restore/ship phase of each.
	fetchNone, fetchZstd         time.Duration
	fetchShipNone, fetchShipZstd time.Duration
	fetchPhases                  string
}

type bench struct {
	hactl, etcdctl string
	l              *lab.Lab
	spec           string // compression none
	specZstd       string
	tls            etcd.TLSFiles
	eps            []string
	store          lab.ObjectStore
	tmp            string
	// floorSave and floorNow are the median fixed costs (a DB of a few KiB) of etcdctl snapshot
	// save and hactl backup now.
	floorSave, floorNow time.Duration
}

func run(hactl string, sizes []int, keep bool) error {
	ctx := context.Background()
	hactl, err := filepath.Abs(hactl)
	if err != nil {
		return err
	}
	l, err := kit.UpLab(ctx, ".lab-bench-backup", keep, lab.Options{Members: 3, ObjectStore: true})
	if err != nil {
		return err
	}
	defer l.Teardown(ctx)
	root, dir := l.Root, l.Dir()
	o, err := l.ObjectStoreEnv()
	if err != nil {
		return err
	}
	b := &bench{hactl: hactl, etcdctl: filepath.Join(root, "bin", "etcdctl"), l: l.Lab, store: o, tmp: filepath.Join(dir, "bench-tmp")}
	if err := os.MkdirAll(b.tmp, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(b.tmp)
	if b.spec, err = writeSpec(root, dir, "bench-none.yaml", v1alpha1.CompressionNone); err != nil {
		return err
	}
	if b.specZstd, err = writeSpec(root, dir, "bench-zstd.yaml", v1alpha1.CompressionZstd); err != nil {
		return err
	}
	pkiDir := filepath.Join(dir, "state-3", "pki")
	b.tls = etcd.TLSFiles{CA: filepath.Join(pkiDir, "ca.crt"), Cert: filepath.Join(pkiDir, "hactl-etcd-client.crt"), Key: filepath.Join(pkiDir, "hactl-etcd-client.key")}
	for _, h := range []string{"cp-a", "cp-b", "cp-c"} {
		host, err := l.Host(h)
		if err != nil {
			return err
		}
		b.eps = append(b.eps, "https://"+host.Address+":2379")
	}
	if _, err := b.hactlRun("bootstrap", "-f", b.spec); err != nil {
		return err
	}
	// The fixed cost of each tool, on the DB as bootstrapped (a few KiB): what neither streams.
	if err := b.floor(ctx); err != nil {
		return err
	}
	var results []measured
	for _, size := range sizes {
		m, err := b.measure(ctx, int64(size)*mib)
		if err != nil {
			return fmt.Errorf("%d MiB: %w", size, err)
		}
		results = append(results, m)
		report(os.Stdout, b, results) // figures so far, in case a later size fails
	}
	return nil
}

// floorRuns is how many times each tool's fixed cost is measured (the median is kept).
const floorRuns = 5

// floor measures etcdctl snapshot save and hactl backup now (compression none) of the nearly empty
// DB: start-up, TLS, status calls, the bucket check and the metadata object, the part of each run
// that does not depend on the DB's size.
func (b *bench) floor(ctx context.Context) error {
	leader, err := b.leader(ctx)
	if err != nil {
		return err
	}
	file := filepath.Join(b.tmp, "floor.db")
	var save, now []float64
	for range floorRuns {
		os.Remove(file)
		p, err := runProc(b.etcdctl, "--endpoints", leader, "--cacert", b.tls.CA, "--cert", b.tls.Cert, "--key", b.tls.Key, "snapshot", "save", file)
		if err != nil {
			return err
		}
		save = append(save, p.wall.Seconds())
		if p, err = b.hactlRun("backup", "now", "-f", b.spec); err != nil {
			return err
		}
		now = append(now, p.wall.Seconds())
	}
	os.Remove(file)
	b.floorSave = time.Duration(kit.Pct(save, 50) * float64(time.Second))
	b.floorNow = time.Duration(kit.Pct(now, 50) * float64(time.Second))
	return nil
}

// writeSpec writes the lab's 3-member etcd spec with spec.backup (compression comp, prefix
// bench-<comp>) and a 4 GiB quota (room for the 1 GiB DB and its free pages).
func writeSpec(root, dir, name, comp string) (string, error) {
	c, err := lab.BuildSpec(3, dir, filepath.Join(root, "bin"))
	if err != nil {
		return "", err
	}
	lab.WithoutLoadBalancer(c)
	lab.WithBackup(c)
	c.Spec.Backup.Compression = comp
	c.Spec.Backup.ObjectStore.Prefix = "bench-" + comp
	c.Spec.Etcd.QuotaBackendBytes = 4 << 30
	raw, err := lab.MarshalSpec(c)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, raw, 0o644)
}

// proc is one finished child process.
type proc struct {
	wall    time.Duration
	maxRSS  int64   // bytes
	cpu     float64 // the child's user + system CPU, seconds
	busy    float64 // how busy the machine's CPUs were during the run, 0..1 (/proc/stat)
	iowait  float64 // the share of CPU time idle waiting for the disk meanwhile, 0..1
	stdout  string
	stderrT []string // stderr lines, each prefixed with the time since start
}

// runProc runs name args, timing it and reading its peak RSS (getrusage of the child).
func runProc(name string, args ...string) (proc, error) {
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	var lines []string
	done := make(chan struct{})
	start := time.Now()
	busy0, io0, total0 := cpuTicks()
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines = append(lines, fmt.Sprintf("%6.1fs %s", time.Since(start).Seconds(), sc.Text()))
		}
	}()
	err := cmd.Run()
	wall := time.Since(start)
	busy1, io1, total1 := cpuTicks()
	pw.Close()
	<-done
	p := proc{wall: wall, stdout: out.String(), stderrT: lines}
	if total1 > total0 {
		p.busy = float64(busy1-busy0) / float64(total1-total0)
		p.iowait = float64(io1-io0) / float64(total1-total0)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.maxRSS = ru.Maxrss * 1024 // KiB on Linux
		p.cpu = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)).Seconds()
	}
	if err != nil {
		return p, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.Join(lines, "\n"))
	}
	return p, nil
}

// parallelAnchor copies file to every member over SSH at once, then runs etcdutl snapshot restore
// (hactl's flags) on every member at once, and returns the wall time of each step (the restores
// timed on the hosts: the slowest).
func (b *bench) parallelAnchor(ctx context.Context, file string) (transfer, restore time.Duration, err error) {
	hosts := []string{"cp-a", "cp-b", "cp-c"}
	name := func(h string) string { return h }
	t0 := time.Now()
	err = provision.ForEach(ctx, hosts, len(hosts), name, func(ctx context.Context, h string) error {
		host, err := b.l.Host(h)
		if err != nil {
			return err
		}
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		cp := exec.CommandContext(ctx, "ssh", "-i", b.l.IdentityFile(), "-o", "UserKnownHostsFile="+b.l.KnownHostsFile(), "-o", "BatchMode=yes",
			"root@"+host.Address, "cat > /root/bench.db")
		cp.Stdin = f
		if out, err := cp.CombinedOutput(); err != nil {
			return fmt.Errorf("ssh cat > /root/bench.db: %v: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	transfer = time.Since(t0)
	var mu sync.Mutex
	err = provision.ForEach(ctx, hosts, len(hosts), name, func(ctx context.Context, h string) error {
		host, err := b.l.Host(h)
		if err != nil {
			return err
		}
		cmd := "rm -rf /root/bench-restore && /usr/local/bin/etcdutl snapshot restore /root/bench.db --name " + h + " --data-dir /root/bench-restore" +
			" --initial-cluster " + h + "=https://" + host.Address + ":2380 --initial-cluster-token bench --initial-advertise-peer-urls https://" + host.Address + ":2380" +
			" --bump-revision 1000000000 --mark-compacted >/dev/null 2>&1"
		out, err := b.l.Exec(ctx, h, "sh", "-c", "sync; s=$(date +%s%N); "+cmd+"; sync; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); rm -rf /root/bench-restore /root/bench.db")
		if err != nil {
			return fmt.Errorf("etcdutl restore: %w", err)
		}
		ms, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			return fmt.Errorf("etcdutl restore: %q", out)
		}
		mu.Lock()
		restore = max(restore, time.Duration(ms)*time.Millisecond)
		mu.Unlock()
		return nil
	})
	return transfer, restore, err
}

// cpuTicks returns the machine's busy, iowait and total CPU ticks so far (/proc/stat's first
// line; idle and iowait are not busy); zeros when it cannot be read.
func cpuTicks() (busy, iowait, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		switch i {
		case 3: // idle
		case 4:
			iowait += n
		default:
			busy += n
		}
	}
	return busy, iowait, total
}

func (b *bench) hactlRun(args ...string) (proc, error) {
	fmt.Fprintf(os.Stderr, "$ hactl %s\n", strings.Join(args, " "))
	return runProc(b.hactl, append(args, "--log-file", filepath.Join(b.tmp, "hactl.log"))...)
}

// fill writes 1 MiB random values until the leader's DB is at least target bytes.
func (b *bench) fill(ctx context.Context, target int64) (int64, error) {
	cli, err := etcd.NewClient(ctx, b.eps, b.tls, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	dbSize := func() (int64, error) {
		var max int64
		for _, ep := range b.eps {
			st, err := cli.Status(ctx, ep)
			if err != nil {
				return 0, err
			}
			max = maxInt(max, st.DbSize)
		}
		return max, nil
	}
	start := time.Now()
	for {
		size, err := dbSize()
		if err != nil {
			return 0, err
		}
		if size >= target {
			fmt.Fprintf(os.Stderr, "DB at %d MiB (filled in %s)\n", size/mib, time.Since(start).Round(time.Second))
			return size, nil
		}
		n := int((target-size)/mib) + 1
		if err := putValues(ctx, cli, n); err != nil {
			return 0, err
		}
	}
}

var keySeq struct {
	sync.Mutex
	n int
}

// valueKind is -values.
var valueKind string

// putPods writes about 1 MiB of Pod-shaped JSON objects (one txn of 128 puts of about 1 KiB each,
// under /registry/pods/<namespace>/<name>) for work item k.
func putPods(ctx context.Context, cli *clientv3.Client, rng *rand.Rand, k int) error {
	var ops []clientv3.Op
	for i := range 128 {
		ns, name := fmt.Sprintf("ns-%d", rng.IntN(50)), fmt.Sprintf("web-%d-%d-%x", k, i, rng.Uint32())
		v := fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":%q,"uid":"%x-%x","resourceVersion":"%d","creationTimestamp":"2026-12-0%dT0%d:%02d:00Z","labels":{"app":"web-%d","pod-template-hash":"%x"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-%d-%x","uid":"%x","controller":true}]},"spec":{"containers":[{"name":"app","image":"registry.example.com/team/app:v1.%d.%d","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"requests":{"cpu":"%dm","memory":"%dMi"}},"env":[{"name":"CONFIG","value":"%x"}],"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","dnsPolicy":"ClusterFirst","nodeName":"node-%d","schedulerName":"hactl-scheduler"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],"hostIP":"172.28.0.%d","podIP":"10.%d.%d.%d","qosClass":"Burstable"}}`,
			name, ns, rng.Uint64(), rng.Uint64(), rng.IntN(1e9), rng.IntN(9)+1, rng.IntN(9), rng.IntN(60), rng.IntN(40), rng.Uint32(), rng.IntN(40), rng.Uint32(), rng.Uint64(),
			rng.IntN(20), rng.IntN(100), 100*(1+rng.IntN(20)), 64*(1+rng.IntN(32)), rng.Uint64(), rng.IntN(100), rng.IntN(250), rng.IntN(255), rng.IntN(255), rng.IntN(255))
		ops = append(ops, clientv3.OpPut("/registry/pods/"+ns+"/"+name, v))
	}
	_, err := cli.Txn(ctx).Then(ops...).Commit()
	return err
}

// putValues writes n work items, 4 writers at a time: keys of 1 MiB random bytes, or (-values k8s)
// about 1 MiB of Pod objects each.
func putValues(ctx context.Context, cli *clientv3.Client, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	work := make(chan int)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.NewChaCha8([32]byte{byte(w), byte(time.Now().UnixNano())})
			pods := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			val := make([]byte, mib)
			for k := range work {
				if valueKind == "k8s" {
					if err := putPods(ctx, cli, pods, k); err != nil {
						errs <- err
						return
					}
					continue
				}
				_, _ = rng.Read(val)
				if _, err := cli.Put(ctx, fmt.Sprintf("bench/fill/%08d", k), string(val)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	keySeq.Lock()
	first := keySeq.n
	keySeq.n += n
	keySeq.Unlock()
	var err error
loop:
	for k := first; k < first+n; k++ {
		select {
		case work <- k:
		case err = <-errs:
			break loop
		}
	}
	close(work)
	wg.Wait()
	select {
	case e := <-errs:
		err = e
	default:
	}
	return err
}

// leader returns the leader's client URL.
func (b *bench) leader(ctx context.Context) (string, error) {
	cli, err := etcd.NewClient(ctx, b.eps, b.tls, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	for _, ep := range b.eps {
		st, err := cli.Status(ctx, ep)
		if err == nil && st.Leader == st.Header.MemberId {
			return ep, nil
		}
	}
	return "", fmt.Errorf("no leader among %v", b.eps)
}

func (b *bench) measure(ctx context.Context, target int64) (measured, error) {
	var m measured
	var err error
	if m.dbSize, err = b.fill(ctx, target); err != nil {
		return m, err
	}
	leader, err := b.leader(ctx)
	if err != nil {
		return m, err
	}
	// Baseline: etcdctl snapshot save to disk, then upload the file.
	file := filepath.Join(b.tmp, "snapshot.db")
	os.Remove(file)
	fmt.Fprintf(os.Stderr, "$ etcdctl --endpoints %s snapshot save %s\n", leader, file)
	p, err := runProc(b.etcdctl, "--endpoints", leader, "--cacert", b.tls.CA, "--cert", b.tls.Cert, "--key", b.tls.Key,
		"--command-timeout", "30m", "snapshot", "save", file)
	if err != nil {
		return m, err
	}
	m.save, m.rssSave, m.cpuSave, m.busySave, m.ioSave = p.wall, p.maxRSS, p.cpu, p.busy, p.iowait
	s3, err := b.store.Client()
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	if _, err := s3.FPutObject(ctx, b.store.Bucket, "bench-baseline/snapshot.db", file, minio.PutObjectOptions{NumThreads: 4}); err != nil {
		return m, fmt.Errorf("upload the etcdctl snapshot: %w", err)
	}
	m.upload = time.Since(t0)

	// hactl backup now, streamed: no compression (the like-for-like figure), then zstd.
	for _, c := range []struct {
		spec        string
		wall        *time.Duration
		rss, stored *int64
		cpu, busy   *float64
		io          *float64
	}{{b.spec, &m.backupNone, &m.rssNone, &m.storedNone, &m.cpuNone, &m.busyNone, &m.ioNone}, {b.specZstd, &m.backupZstd, &m.rssZstd, &m.storedZstd, &m.cpuZstd, &m.busyZstd, &m.ioZstd}} {
		p, err := b.hactlRun("backup", "now", "-f", c.spec, "-o", "json")
		if err != nil {
			return m, err
		}
		var rep struct {
			Snapshot *backup.Metadata `json:"snapshot"`
		}
		if err := json.Unmarshal([]byte(p.stdout), &rep); err != nil || rep.Snapshot == nil {
			return m, fmt.Errorf("backup now -o json: %v: %s", err, p.stdout)
		}
		*c.wall, *c.rss, *c.stored, *c.cpu, *c.busy, *c.io = p.wall, p.maxRSS, rep.Snapshot.StoredSizeBytes, p.cpu, p.busy, p.iowait
	}

	// One member's etcdutl restore of the same file on its host, with hactl's flags.
	h, err := b.l.Host("cp-a")
	if err != nil {
		return m, err
	}
	// One transfer of the file to it over SSH, as a user would copy it.
	f, err := os.Open(file)
	if err != nil {
		return m, err
	}
	cp := exec.Command("ssh", "-i", b.l.IdentityFile(), "-o", "UserKnownHostsFile="+b.l.KnownHostsFile(), "-o", "BatchMode=yes",
		"root@"+h.Address, "cat > /root/bench.db")
	cp.Stdin = f
	t0 = time.Now()
	cpOut, err := cp.CombinedOutput()
	m.transfer = time.Since(t0)
	f.Close()
	if err != nil {
		return m, fmt.Errorf("ssh cat > /root/bench.db on cp-a: %v: %s", err, cpOut)
	}
	restore1 := "rm -rf /root/bench-restore && /usr/local/bin/etcdutl snapshot restore /root/bench.db --name cp-a --data-dir /root/bench-restore" +
		" --initial-cluster cp-a=https://" + h.Address + ":2380 --initial-cluster-token bench --initial-advertise-peer-urls https://" + h.Address + ":2380" +
		" --bump-revision 1000000000 --mark-compacted >/dev/null 2>&1"
	// Timed on the host itself, so docker exec's own start-up is not counted.
	out, err := b.l.Exec(ctx, "cp-a", "sh", "-c", "sync; s=$(date +%s%N); "+restore1+"; sync; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); rm -rf /root/bench-restore /root/bench.db")
	if err != nil {
		return m, fmt.Errorf("etcdutl restore on cp-a: %w", err)
	}
	ms, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return m, fmt.Errorf("etcdutl restore on cp-a: %q", out)
	}
	m.restore1 = time.Duration(ms) * time.Millisecond

	// The lab's floor for three members: the same transfer to cp-a, cp-b and cp-c at once, then
	// the three etcdutl restores at once (the lab's hosts share this machine's disk and CPUs).
	if m.transfer3, m.restore3x, err = b.parallelAnchor(ctx, file); err != nil {
		return m, err
	}

	// The whole 3-member restore by hactl from the same file.
	p, err = b.hactlRun("restore", "-f", b.spec, "--from", file, "--force", "--yes")
	if err != nil {
		return m, err
	}
	m.restore3 = p.wall
	var phases []string
	for _, line := range p.stderrT {
		if strings.Contains(line, "restore/") || strings.Contains(line, "etcd/wait") || strings.Contains(line, "verified here") {
			phases = append(phases, "    "+line)
		}
		if _, after, ok := strings.Cut(line, "[restore/data] ✓ "); ok {
			m.restoreData, _ = time.ParseDuration(strings.Fields(after)[0])
		}
	}
	m.restorePhases = strings.Join(phases, "\n")
	os.Remove(file)

	// The same restore from the store: the members fetch the newest backup themselves.
	for _, c := range []struct {
		spec       string
		wall, ship *time.Duration
	}{{b.spec, &m.fetchNone, &m.fetchShipNone}, {b.specZstd, &m.fetchZstd, &m.fetchShipZstd}} {
		p, err := b.hactlRun("restore", "-f", c.spec, "--from", "latest", "--force", "--yes")
		if err != nil {
			return m, err
		}
		*c.wall = p.wall
		for _, line := range p.stderrT {
			if strings.Contains(line, "fetched") || strings.Contains(line, "copied from here") || strings.Contains(line, "[restore/ship] ✓") {
				m.fetchPhases += "    " + line + "\n"
			}
			if _, after, ok := strings.Cut(line, "[restore/ship] ✓ "); ok {
				*c.ship, _ = time.ParseDuration(strings.Fields(after)[0])
			}
		}
	}
	return m, nil
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// report prints every size's figures with the goals.
func report(w io.Writer, b *bench, rs []measured) {
	fmt.Fprintln(w)
	what := "1 MiB random values"
	if valueKind == "k8s" {
		what = "Pod-shaped JSON objects of about 1 KiB"
	}
	fmt.Fprintf(w, "hactl backup / restore benchmark (3 etcd members in the lab, MinIO on objstore; %s)\n", what)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DB\tetcdctl save\t+ upload\t= two-step\thactl now (none)\tratio vs save\thactl now (zstd)\tpeak RSS none / zstd / etcdctl\trestore 3 (hactl)\tof which restore/data\t1 transfer + etcdutl 1 member\tratio whole / restore/data vs etcdutl")
	for _, r := range rs {
		one := r.transfer + r.restore1
		fmt.Fprintf(tw, "%d MiB\t%s\t%s\t%s\t%s\t%.2f× (%s)\t%s\t%d / %d / %d MiB (%s)\t%s\t%s\t%s + %s = %s\t%.2f× (%s) / %.2f× (%s)\n",
			r.dbSize/mib, kit.Secs(r.save), kit.Secs(r.upload), kit.Secs(r.save+r.upload), kit.Secs(r.backupNone),
			r.backupNone.Seconds()/r.save.Seconds(), kit.Verdict(r.backupNone.Seconds() <= goalBackupRatio*r.save.Seconds()),
			kit.Secs(r.backupZstd), r.rssNone/mib, r.rssZstd/mib, r.rssSave/mib, kit.Verdict(max(r.rssNone, r.rssZstd) <= goalPeakRSS),
			kit.Secs(r.restore3), kit.Secs(r.restoreData), kit.Secs(r.transfer), kit.Secs(r.restore1), kit.Secs(one), r.restore3.Seconds()/one.Seconds(), kit.Verdict(r.restore3.Seconds() <= goalRestoreRatio*one.Seconds()),
			r.restoreData.Seconds()/r.restore1.Seconds(), kit.Verdict(r.restoreData.Seconds() <= goalRestoreRatio*r.restore1.Seconds()))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nfixed cost, a DB of a few KiB (median of %d): hactl backup now %s, etcdctl snapshot save %s; what is left streams:\n", floorRuns, kit.Secs(b.floorNow), kit.Secs(b.floorSave))
	for _, r := range rs {
		fmt.Fprintf(w, "  %d MiB: hactl %s − %s = %s vs etcdctl %s − %s = %s: %.2f× (none)\n", r.dbSize/mib,
			kit.Secs(r.backupNone), kit.Secs(b.floorNow), kit.Secs(r.backupNone-b.floorNow), kit.Secs(r.save), kit.Secs(b.floorSave), kit.Secs(r.save-b.floorSave),
			(r.backupNone-b.floorNow).Seconds()/(r.save-b.floorSave).Seconds())
	}
	fmt.Fprintln(w, "\nthe lab's floor for 3 members (its hosts share this machine's disk and CPUs): the same transfer to the 3 at once + their 3 etcdutl restores at once")
	for _, r := range rs {
		floor := r.transfer3 + r.restore3x
		fmt.Fprintf(w, "  %d MiB: %s + %s = %s; hactl restore from the file %.2f×, members fetching (none) %.2f×, (zstd) %.2f× of it\n", r.dbSize/mib,
			kit.Secs(r.transfer3), kit.Secs(r.restore3x), kit.Secs(floor), r.restore3.Seconds()/floor.Seconds(), r.fetchNone.Seconds()/floor.Seconds(), r.fetchZstd.Seconds()/floor.Seconds())
	}
	fmt.Fprintf(w, "\nthe machine's %d CPUs during each run: busy / waiting for the disk (the tool's own CPU seconds):\n", runtime.NumCPU())
	for _, r := range rs {
		fmt.Fprintf(w, "  %d MiB: etcdctl save %.0f%% / %.0f%% (%.2fs), hactl now none %.0f%% / %.0f%% (%.2fs), zstd %.0f%% / %.0f%% (%.2fs)\n", r.dbSize/mib,
			100*r.busySave, 100*r.ioSave, r.cpuSave, 100*r.busyNone, 100*r.ioNone, r.cpuNone, 100*r.busyZstd, 100*r.ioZstd, r.cpuZstd)
		// The whole machine's CPU work during a run (etcd, MinIO and the tool), and the shortest wall
		// time that work allows on this machine's CPUs: the run's CPU floor.
		n := float64(runtime.NumCPU())
		work := func(busy float64, wall time.Duration) float64 { return busy * wall.Seconds() * n }
		ws, wn := work(r.busySave, r.save), work(r.busyNone, r.backupNone)
		fmt.Fprintf(w, "    the machine's CPU work: etcdctl save %.1f CPU-s, hactl now (none) %.1f CPU-s (%.2f×); hactl's wall time %.2f× its CPU floor (%.1f CPU-s / %d CPUs)\n",
			ws, wn, wn/ws, r.backupNone.Seconds()/(wn/n), wn, runtime.NumCPU())
	}
	fmt.Fprintln(w, "\nrestore --from latest, every member fetching the backup from the object store itself:")
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DB	compression none: whole (restore/ship)	ratio vs 1 transfer + etcdutl	zstd: whole (restore/ship)	ratio vs 1 transfer + etcdutl")
	for _, r := range rs {
		one := r.transfer + r.restore1
		fmt.Fprintf(tw, "%d MiB	%s (%s)	%.2f× (%s)	%s (%s)	%.2f× (%s)\n", r.dbSize/mib,
			kit.Secs(r.fetchNone), kit.Secs(r.fetchShipNone), r.fetchNone.Seconds()/one.Seconds(), kit.Verdict(r.fetchNone.Seconds() <= goalRestoreRatio*one.Seconds()),
			kit.Secs(r.fetchZstd), kit.Secs(r.fetchShipZstd), r.fetchZstd.Seconds()/one.Seconds(), kit.Verdict(r.fetchZstd.Seconds() <= goalRestoreRatio*one.Seconds()))
	}
	tw.Flush()
	fmt.Fprintf(w, "goals: backup ≤ %.1f× etcdctl snapshot save alone; peak RSS ≤ %d MiB; 3-member restore ≤ %.1f× (one transfer of the file + one member's etcdutl restore)\n"+
		"(the whole restore also verifies the snapshot here, ships it to 3 hosts over SSH, stops etcd and waits for quorum; restore/data is the etcdutl restores themselves)\n",
		goalBackupRatio, goalPeakRSS/mib, goalRestoreRatio)
	for _, r := range rs {
		fmt.Fprintf(w, "%d MiB: stored %d MiB (none) / %d MiB (zstd); hactl restore progress (time since start):\n%s\n",
			r.dbSize/mib, r.storedNone/mib, r.storedZstd/mib, r.restorePhases)
		fmt.Fprintf(w, "%d MiB: restore --from latest (members fetching), restore/ship:\n%s", r.dbSize/mib, r.fetchPhases)
	}
}
