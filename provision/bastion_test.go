package provision_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/provision/internal/sshtest"
	"golang.org/x/crypto/ssh/knownhosts"
)

func addrOf(s *sshtest.Server) string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// bastionLab is a bastion forwarding to targets that are addressed by
// addresses only it can reach (10.255.0.x:22, rewritten to the test servers).
type bastionLab struct {
	dir     string
	key     sshtest.Key
	keyFile string
	known   string
	bastion *sshtest.Server
	targets []*sshtest.Server
}

func newBastionLab(t *testing.T, n int, bastionOpts ...sshtest.Option) *bastionLab {
	t.Helper()
	l := &bastionLab{dir: t.TempDir(), key: sshtest.NewKey(t)}
	l.keyFile = l.key.WriteKeyFile(t, l.dir, "id", 0o600)
	l.known = filepath.Join(l.dir, "known_hosts")
	rewrite := map[string]string{}
	for i := range n {
		s := sshtest.New(t, l.key.Public())
		l.targets = append(l.targets, s)
		rewrite[l.address(i)+":22"] = addrOf(s)
	}
	l.bastion = sshtest.New(t, l.key.Public(), append([]sshtest.Option{sshtest.WithForwarding(rewrite)}, bastionOpts...)...)
	return l
}

func (l *bastionLab) address(i int) string { return fmt.Sprintf("10.255.0.%d", i+1) }

func (l *bastionLab) target(i int) provision.Target {
	return provision.Target{Name: fmt.Sprintf("cp-%d", i), Address: l.address(i)}
}

// trustBastion records the bastion's host key in file.
func (l *bastionLab) trustBastion(t *testing.T, file string) {
	t.Helper()
	line := knownhosts.Line([]string{addrOf(l.bastion)}, l.bastion.HostKey.Public()) + "\n"
	if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (l *bastionLab) config() provision.Config {
	return provision.Config{
		User:              "root",
		IdentityFile:      l.keyFile,
		KnownHostsFile:    l.known,
		AcceptNewHostKeys: true, // the targets'; never the bastion's
		ConnectTimeout:    5 * time.Second,
		Bastion: &provision.BastionConfig{
			Target: provision.Target{Name: "jump", Address: l.bastion.Host, Port: l.bastion.Port},
		},
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBastionSharedConnection(t *testing.T) {
	const n = 4
	l := newBastionLab(t, n)
	l.trustBastion(t, l.known)
	d, err := provision.NewDialer(l.config())
	if err != nil {
		t.Fatal(err)
	}
	clients := make([]*provision.Client, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := d.Dial(ctxTimeout(t, 5*time.Second), l.target(i))
			if err != nil {
				t.Error(err)
				return
			}
			clients[i] = c
			if _, err := c.Run(ctxTimeout(t, 5*time.Second), "s", "true"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if got := l.bastion.Conns(); got != 1 {
		t.Errorf("bastion saw %d connections, want 1 shared by all targets", got)
	}
	fwd := l.bastion.Forwards()
	slices.Sort(fwd)
	for i, s := range l.targets {
		if s.Conns() != 1 || s.Execs() != 2 { // probe + Run
			t.Errorf("target %d: %d connections, %d execs", i, s.Conns(), s.Execs())
		}
		if fwd[i] != l.address(i)+":22" {
			t.Errorf("forwards %v", fwd)
		}
	}
	// The targets' keys were learnt under the addresses hactl uses.
	known, _ := os.ReadFile(l.known)
	for i, s := range l.targets {
		if want := knownhosts.Line([]string{l.address(i)}, s.HostKey.Public()); !strings.Contains(string(known), want+"\n") {
			t.Errorf("known_hosts lacks %q", want)
		}
	}

	// The bastion connection outlives the Dialer until the last client.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dial(context.Background(), l.target(0)); !errors.Is(err, provision.ErrDialerClosed) {
		t.Errorf("Dial after Close: %v", err)
	}
	for _, c := range clients[1:] {
		c.Close()
	}
	if _, err := clients[0].Run(ctxTimeout(t, 5*time.Second), "s", "true"); err != nil {
		t.Fatalf("last client broken: %v", err)
	}
	if l.bastion.Active() != 1 {
		t.Errorf("bastion connections open: %d, want 1", l.bastion.Active())
	}
	clients[0].Close()
	waitFor(t, "the bastion connection to close", func() bool { return l.bastion.Active() == 0 })
}

func TestBastionOwnUserKeyAndKnownHosts(t *testing.T) {
	jumpKey := sshtest.NewKey(t)
	l := newBastionLab(t, 1)
	// The bastion accepts only its own key (and the lab key, which must
	// not be needed: check the user and keys offered).
	bastion := sshtest.New(t, jumpKey.Public(), sshtest.WithForwarding(map[string]string{l.address(0) + ":22": addrOf(l.targets[0])}))
	l.bastion = bastion
	bastionKnown := filepath.Join(l.dir, "bastion_known_hosts")
	l.trustBastion(t, bastionKnown)
	cfg := l.config()
	cfg.Bastion.User = "jump"
	cfg.Bastion.IdentityFile = jumpKey.WriteKeyFile(t, l.dir, "jump_id", 0o600)
	cfg.Bastion.KnownHostsFile = bastionKnown
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), l.target(0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := bastion.Users(); !slices.Equal(got, []string{"jump"}) {
		t.Errorf("bastion logins %v, want [jump]", got)
	}
	if got := bastion.Offered(); !slices.Equal(got, []string{fp(jumpKey)}) {
		t.Errorf("bastion was offered %v, want only its own key", got)
	}
	if got := l.targets[0].Users(); !slices.Equal(got, []string{"root"}) {
		t.Errorf("target logins %v", got)
	}
	if b, _ := os.ReadFile(bastionKnown); strings.Count(string(b), "\n") != 1 {
		t.Errorf("bastion known_hosts changed: %q", b)
	}
}

func TestBastionUnknownHostKeyRefused(t *testing.T) {
	l := newBastionLab(t, 3)
	d, err := provision.NewDialer(l.config()) // AcceptNewHostKeys is set
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range 3 {
		_, err := d.Dial(ctxTimeout(t, 5*time.Second), l.target(i))
		var hk *provision.HostKeyError
		if !errors.As(err, &hk) || !hk.Bastion || hk.Changed() || hk.Host != "jump" {
			t.Fatalf("err = %v, want the bastion's unknown *HostKeyError", err)
		}
		for _, want := range []string{fmt.Sprintf("host cp-%d: connect to 10.255.0.%d:22 via bastion %s: ", i, i+1, addrOf(l.bastion)),
			"host key of bastion", "never accepts", "ssh-keyscan"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
	}
	if _, err := os.Stat(l.known); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("known_hosts written: %v", err)
	}
	if got := l.bastion.Conns(); got != 1 {
		t.Errorf("bastion dialled %d times, want once (the verdict is shared)", got)
	}
	for _, s := range l.targets {
		if s.Conns() != 0 {
			t.Error("a target was reached")
		}
	}
}

func TestBastionChangedHostKeyRefused(t *testing.T) {
	l := newBastionLab(t, 1)
	line := knownhosts.Line([]string{addrOf(l.bastion)}, sshtest.NewKey(t).Public()) + "\n"
	if err := os.WriteFile(l.known, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), l.target(0), l.config())
	var hk *provision.HostKeyError
	if !errors.As(err, &hk) || !hk.Bastion || !hk.Changed() || strings.Contains(err.Error(), "--accept-new-host-keys") {
		t.Errorf("err = %v", err)
	}
}

func TestBastionIPv6(t *testing.T) {
	key := sshtest.NewKey(t)
	dir := t.TempDir()
	target := sshtest.New(t, key.Public(), sshtest.ListenOn("[::1]:0")) // skips without IPv6
	bastion := sshtest.New(t, key.Public(), sshtest.ListenOn("[::1]:0"), sshtest.WithForwarding(nil))
	known := filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{addrOf(bastion)}, bastion.HostKey.Public()) + "\n"
	if !strings.HasPrefix(line, fmt.Sprintf("[::1]:%d ", bastion.Port)) {
		t.Fatalf("line %q", line)
	}
	if err := os.WriteFile(known, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := provision.Config{
		User: "root", IdentityFile: key.WriteKeyFile(t, dir, "id", 0o600), KnownHostsFile: known,
		AcceptNewHostKeys: true, ConnectTimeout: 5 * time.Second,
		Bastion: &provision.BastionConfig{Target: provision.Target{Address: "::1", Port: bastion.Port}},
	}
	c, err := provision.Dial(ctxTimeout(t, 5*time.Second), provision.Target{Name: "v6", Address: "::1", Port: target.Port}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Run(ctxTimeout(t, 5*time.Second), "s", "true"); err != nil {
		t.Fatal(err)
	}
	if got := bastion.Forwards(); !slices.Equal(got, []string{fmt.Sprintf("[::1]:%d", target.Port)}) {
		t.Errorf("forwards %v", got)
	}
	b, _ := os.ReadFile(known)
	if want := fmt.Sprintf("\n[::1]:%d ssh-ed25519 ", target.Port); !strings.Contains(string(b), want) {
		t.Errorf("known_hosts %q lacks %q", b, want)
	}

	// A zone index means nothing on the bastion's side.
	_, err = provision.Dial(ctxTimeout(t, 5*time.Second), provision.Target{Name: "ll", Address: "fe80::1%lo", Port: target.Port}, cfg)
	if err == nil || !strings.Contains(err.Error(), `zone "lo"`) {
		t.Errorf("err = %v, want the zone refused", err)
	}
}

func TestBastionTargetTimeoutAndCancel(t *testing.T) {
	mute := silentListener(t)
	l := newBastionLab(t, 0, sshtest.WithForwarding(map[string]string{"10.255.0.9:22": mute.String()}))
	l.trustBastion(t, l.known)
	target := provision.Target{Name: "mute", Address: "10.255.0.9"}

	cfg := l.config()
	cfg.ConnectTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := provision.Dial(context.Background(), target, cfg)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout took %v", d)
	}

	cfg.ConnectTimeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start = time.Now()
	_, err = provision.Dial(ctx, target, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want cancellation", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %v", d)
	}
}

func TestBastionForwardingRefused(t *testing.T) {
	l := newBastionLab(t, 1)
	l.bastion = sshtest.New(t, l.key.Public()) // no forwarding
	l.trustBastion(t, l.known)
	_, err := provision.Dial(ctxTimeout(t, 5*time.Second), l.target(0), l.config())
	if err == nil || !strings.Contains(err.Error(), "prohibited") {
		t.Errorf("err = %v", err)
	}
}

// TestDialTCPThroughBastion: a plain TCP connection (what the etcd client uses) goes through the
// shared bastion connection; here it reaches a target's sshd, whose banner proves the path.
func TestDialTCPThroughBastion(t *testing.T) {
	l := newBastionLab(t, 1)
	l.trustBastion(t, l.known)
	d, err := provision.NewDialer(l.config())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.HasBastion() {
		t.Fatal("HasBastion() = false")
	}
	conn, err := d.DialTCP(ctxTimeout(t, 5*time.Second), l.address(0)+":22")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	banner := make([]byte, 8)
	if _, err := io.ReadFull(conn, banner); err != nil || string(banner) != "SSH-2.0-" {
		t.Fatalf("banner %q, err %v", banner, err)
	}
	if fwd := l.bastion.Forwards(); len(fwd) != 1 || fwd[0] != l.address(0)+":22" {
		t.Fatalf("forwards %v", fwd)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DialTCP(context.Background(), l.address(0)+":22"); !errors.Is(err, provision.ErrDialerClosed) {
		t.Fatalf("DialTCP after Close: %v", err)
	}
}

// TestPerTargetBastion: a target with its own bastion (spec.hosts[*].ssh.bastion) is reached
// through it with its own user and key, the others through Config.Bastion; DialTCP routes by the
// destination address (Config.BastionFor); each bastion connection is shared and closed with the
// last client.
func TestPerTargetBastion(t *testing.T) {
	l := newBastionLab(t, 2)
	l.trustBastion(t, l.known)
	jumpKey := sshtest.NewKey(t)
	// Site B's own bastion forwards to target 1 (and to target 0's address for the routing check).
	siteB := sshtest.New(t, jumpKey.Public(), sshtest.WithForwarding(map[string]string{
		l.address(1) + ":22": addrOf(l.targets[1]), l.address(1) + ":2379": addrOf(l.targets[1])}))
	siteBKnown := filepath.Join(l.dir, "site_b_known_hosts")
	if err := os.WriteFile(siteBKnown, []byte(knownhosts.Line([]string{addrOf(siteB)}, siteB.HostKey.Public())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	own := &provision.BastionConfig{Target: provision.Target{Name: "bastion of cp-1", Address: siteB.Host, Port: siteB.Port},
		User: "jump", IdentityFile: jumpKey.WriteKeyFile(t, l.dir, "jump_b", 0o600), KnownHostsFile: siteBKnown}
	cfg := l.config()
	cfg.BastionFor = map[string]*provision.BastionConfig{l.address(1): own}

	// Its key file must be among HostIdentityFiles.
	d, err := provision.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t1 := l.target(1)
	t1.Bastion = own
	if _, err := d.Dial(ctxTimeout(t, 5*time.Second), t1); err == nil || !strings.Contains(err.Error(), "HostIdentityFiles") {
		t.Errorf("own bastion key not loaded: %v", err)
	}
	d.Close()

	cfg.HostIdentityFiles = []string{own.IdentityFile}
	d, err = provision.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := d.Dial(ctxTimeout(t, 5*time.Second), l.target(0))
	if err != nil {
		t.Fatal(err)
	}
	c1, err := d.Dial(ctxTimeout(t, 5*time.Second), t1)
	if err != nil {
		t.Fatal(err)
	}
	if l.bastion.Conns() != 1 || siteB.Conns() != 1 {
		t.Errorf("connections: spec bastion %d, site B's %d; want one each", l.bastion.Conns(), siteB.Conns())
	}
	if got := siteB.Users(); !slices.Equal(got, []string{"jump"}) {
		t.Errorf("site B's bastion logins %v, want [jump]", got)
	}
	if got := siteB.Offered(); !slices.Equal(got, []string{fp(jumpKey)}) {
		t.Errorf("site B's bastion was offered %v, want only its own key", got)
	}
	if fwd := siteB.Forwards(); !slices.Equal(fwd, []string{l.address(1) + ":22"}) {
		t.Errorf("site B forwarded %v", fwd)
	}
	// DialTCP (etcd's client URL) goes through the host's own bastion.
	nc, err := d.DialTCP(ctxTimeout(t, 5*time.Second), net.JoinHostPort(l.address(1), "2379"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if fwd := siteB.Forwards(); len(fwd) != 2 || fwd[1] != l.address(1)+":2379" {
		t.Errorf("DialTCP to cp-1: site B forwarded %v", fwd)
	}
	if !d.HasBastion() {
		t.Error("HasBastion false")
	}
	d.Close()
	c0.Close()
	c1.Close()
	waitFor(t, "both bastion connections to close", func() bool { return l.bastion.Active() == 0 && siteB.Active() == 0 })
}
