// Package heal carries out hactl-operator's replacement of a lost etcd member by a new member on
// a spare host, one step at a time, with etcd/membership's learner join (the one bootstrap and
// `hactl etcd member replace` use): the new member added as a learner (membership.AddLearner),
// started with the member list etcd returned and --initial-cluster-state existing
// (membership.JoinInitialCluster, etcd.StartCommand), promoted (membership.Promote) once its raft
// applied index reached the leader's committed index (membership.WaitCaughtUp); the lost member
// removed (membership.RemoveMember) before or after, as membership.ReplaceOrder decides (etcd's
// strict reconfiguration check refuses an add while fewer than a quorum of the larger cluster is
// connected).
//
// Every step is idempotent and the caller records the step reached (the EtcdCluster's
// status.healing) before running it, so a replica that takes over the Lease continues where the
// last one stopped instead of starting over; RollBack undoes a heal that cannot finish. The spare
// is reached through Host (provision.Client over SSH, its host keys pinned); the cluster through
// membership.Client (*clientv3.Client satisfies it).
package heal

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/provision"
)

// Host is the spare, as root: provision.Client satisfies it.
type Host interface {
	Upload(ctx context.Context, step string, files []provision.File) error
	Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error)
}

// Job is one replacement's fixed inputs.
type Job struct {
	// Cluster is the EtcdCluster's name (hactl's metadata.name: the marker file names it).
	Cluster string
	// Spare receives the new member; Template and ElectionTimeout are how it runs.
	Spare           hactlv1.SpareHost
	Template        hactlv1.MemberTemplate
	ElectionTimeout time.Duration
	// Certificates is the spare's certificate Secret's data: ca.crt, server.crt, server.key,
	// peer.crt and peer.key.
	Certificates map[string][]byte
	// EtcdBinary is the local etcd binary installed on the spare (the operator image's, checked
	// against Template.Version by the caller).
	EtcdBinary string
	// CatchUpTimeout bounds the wait for the started learner to catch up (0: 2 minutes).
	CatchUpTimeout time.Duration
	// Now is the clock (time.Now when nil); Logf reports progress (nil: quiet).
	Now  func() time.Time
	Logf func(format string, args ...any)
}

// Begin returns the status of a new heal of member old (ID oldID, hex) onto spare in order
// (membership.OrderAddFirst or OrderRemoveFirst, as membership.ReplaceOrder decides), started at
// now: step Planned.
func Begin(old, oldID, spare, order string, now time.Time) *hactlv1.HealingStatus {
	t := metav1.NewTime(now)
	return &hactlv1.HealingStatus{Member: old, MemberID: oldID, Spare: spare, Order: order, Step: hactlv1.HealPlanned, StartedAt: t, StepAt: t}
}

// Advance runs hs's step and moves hs to the next one (StepAt set, Attempts and LastError
// cleared), returning finished once the new member is a voter and the lost one is gone. On an
// error hs is left at its step (the caller counts attempts and records the error; a retry runs
// the step again). Errors: etcd's, the host's (*provision.CommandError, *provision.UploadError,
// a *provision.HostKeyError from dialing is the caller's), a catch-up that timed out.
func Advance(ctx context.Context, job Job, cl membership.Client, host Host, hs *hactlv1.HealingStatus) (finished bool, err error) {
	oldID, err := parseID(hs.MemberID)
	if err != nil {
		return false, fmt.Errorf("status.healing.memberID: %w", err)
	}
	removeFirst := hs.Order == membership.OrderRemoveFirst
	var next hactlv1.HealStep
	switch hs.Step {
	case hactlv1.HealPlanned:
		// Nothing is changed before the spare is known to answer with a pinned host key and run
		// systemd: a lost member is never removed for a spare that cannot take its place.
		if _, err := host.Run(ctx, "heal/preflight", preflightScript); err != nil {
			return false, fmt.Errorf("spare %s: %w", job.Spare.Name, err)
		}
		next = hactlv1.HealAddingLearner
		if removeFirst {
			next = hactlv1.HealRemovingMember
		}
	case hactlv1.HealRemovingMember:
		if _, err := membership.RemoveMember(ctx, cl, oldID, 0); err != nil {
			return false, fmt.Errorf("removing %s (%s): %w", hs.Member, hs.MemberID, err)
		}
		job.logf("removed member %s (%s)", hs.Member, hs.MemberID)
		if !removeFirst {
			return true, nil
		}
		next = hactlv1.HealAddingLearner
	case hactlv1.HealAddingLearner:
		id, err := addLearner(ctx, job, cl, host, hs.NewMemberID == "")
		if err != nil {
			return false, fmt.Errorf("adding %s as a learner: %w", job.Spare.Name, err)
		}
		hs.NewMemberID = fmt.Sprintf("%x", id)
		job.logf("added learner %s (%s)", job.Spare.Name, hs.NewMemberID)
		next = hactlv1.HealStartingMember
	case hactlv1.HealStartingMember:
		newID, err := parseID(hs.NewMemberID)
		if err != nil {
			return false, fmt.Errorf("status.healing.newMemberID: %w", err)
		}
		initial, err := startMember(ctx, job, cl, host, newID)
		if err != nil {
			return false, fmt.Errorf("starting %s: %w", job.Spare.Name, err)
		}
		hs.InitialCluster = initial
		next = hactlv1.HealPromoting
	case hactlv1.HealPromoting:
		newID, err := parseID(hs.NewMemberID)
		if err != nil {
			return false, fmt.Errorf("status.healing.newMemberID: %w", err)
		}
		if _, err := membership.Promote(ctx, cl, newID, 0); err != nil {
			return false, fmt.Errorf("promoting %s (%s): %w", job.Spare.Name, hs.NewMemberID, err)
		}
		job.logf("promoted %s (%s) to a voting member", job.Spare.Name, hs.NewMemberID)
		if removeFirst {
			return true, nil
		}
		next = hactlv1.HealRemovingMember
	default:
		return false, fmt.Errorf("status.healing.step %q: not a step Advance runs", hs.Step)
	}
	hs.Step, hs.StepAt, hs.Attempts, hs.LastError = next, metav1.NewTime(job.now()), 0, ""
	return false, nil
}

// RollBack undoes what a heal that cannot finish did: the new member removed from the cluster
// while it is still a learner (a promoted one stays: it serves, and removing a voter is a
// membership change of its own), and, when the heal got as far as the spare (TouchedSpare), etcd
// stopped and disabled there and its data dir moved aside (never deleted). The lost member, when it was removed, stays removed. Errors are
// joined: the caller records them and the heal as failed either way.
func RollBack(ctx context.Context, job Job, cl membership.Client, host Host, hs *hactlv1.HealingStatus) error {
	var errs []error
	if hs.NewMemberID != "" {
		if id, err := parseID(hs.NewMemberID); err == nil {
			ml, err := cl.MemberList(ctx)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("member list: %w", err))
			default:
				if m := membership.MemberByID(ml.Members, id); m != nil && m.IsLearner {
					if _, err := membership.RemoveMember(ctx, cl, id, 0); err != nil {
						errs = append(errs, fmt.Errorf("removing learner %s: %w", hs.NewMemberID, err))
					}
				}
			}
		}
	}
	if host != nil && TouchedSpare(hs) {
		stamp := job.now().UTC().Format("20060102T150405Z")
		if _, err := host.Run(ctx, "heal/rollback", membership.RetireScript(job.Template.DataDir, stamp)); err != nil {
			errs = append(errs, fmt.Errorf("retiring etcd on %s: %w", job.Spare.Name, err))
		}
	}
	return errors.Join(errs...)
}

// preflightScript checks the spare can run an etcd unit.
const preflightScript = `command -v systemctl >/dev/null || { echo "no systemctl: hactl runs etcd as a systemd unit" >&2; exit 1; }`

// TouchedSpare reports whether the heal hs may have installed anything on the spare: from the
// learner's add on (with add-first, the lost member's removal comes after it too).
func TouchedSpare(hs *hactlv1.HealingStatus) bool {
	switch hs.Step {
	case hactlv1.HealAddingLearner, hactlv1.HealStartingMember, hactlv1.HealPromoting:
		return true
	case hactlv1.HealRemovingMember:
		return hs.Order == membership.OrderAddFirst
	}
	return false
}

// addLearner installs the binary, certificates and marker on the spare (first, when fresh, etcd
// stopped there and a data dir left by an earlier heal moved aside, never deleted:
// membership.RetireScript, so the learner starts empty), then adds the
// spare's peer URL as a learner (membership.AddLearner) unless a member already has it (a retry
// after the add), and returns its ID. etcd's refusals are the caller's to retry.
func addLearner(ctx context.Context, job Job, cl membership.Client, host Host, fresh bool) (uint64, error) {
	peer, err := job.peerURL()
	if err != nil {
		return 0, err
	}
	ml, err := cl.MemberList(ctx)
	if err != nil {
		return 0, fmt.Errorf("member list: %w", err)
	}
	if m := membership.MemberByPeer(ml.Members, peer); m != nil {
		return m.ID, nil
	}
	if fresh {
		if _, err := host.Run(ctx, "heal/data-dir", membership.RetireScript(job.Template.DataDir, job.now().UTC().Format("20060102T150405Z"))); err != nil {
			return 0, err
		}
	}
	files, err := job.files()
	if err != nil {
		return 0, err
	}
	defer closeAll(files)
	if err := host.Upload(ctx, "heal/install", files); err != nil {
		return 0, err
	}
	id, _, err := membership.AddLearner(ctx, cl, peer, 0, nil)
	return id, err
}

// startMember renders the spare's unit with the member list etcd has now (the new member as
// job.Spare.Name: membership.JoinInitialCluster) and --initial-cluster-state existing, starts it
// (etcd.StartCommand, waiting for the unit: systemctl returns once etcd serves, so a unit that
// fails is this step's error at once), waits until its raft applied index reached the leader's
// committed index (membership.WaitCaughtUp, for at most job.CatchUpTimeout), and returns the
// unit's --initial-cluster.
func startMember(ctx context.Context, job Job, cl membership.Client, host Host, id uint64) (string, error) {
	ml, err := cl.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("member list: %w", err)
	}
	if membership.MemberByID(ml.Members, id) == nil {
		return "", fmt.Errorf("member %x is not in the member list: the learner was removed meanwhile", id)
	}
	u, err := job.unitConfig(ml.Members, id)
	if err != nil {
		return "", err
	}
	unit, err := etcd.RenderUnit(u)
	if err != nil {
		return "", err
	}
	if err := host.Upload(ctx, "heal/unit", []provision.File{{Path: etcd.RemoteUnitPath, Mode: 0o644, Content: unit}}); err != nil {
		return "", err
	}
	if _, err := host.Run(ctx, "heal/start", etcd.StartCommand(job.Template.DataDir, "start", true)); err != nil {
		return "", err
	}
	client, err := job.clientURL()
	if err != nil {
		return "", err
	}
	cu, err := membership.WaitCaughtUp(ctx, cl, client, job.catchUpTimeout())
	if err != nil {
		return "", err
	}
	job.logf("%s caught up with the leader (raft applied index %d ≥ %d)", job.Spare.Name, cu.Applied, cu.Committed)
	return u.InitialCluster, nil
}

func (job Job) catchUpTimeout() time.Duration {
	if job.CatchUpTimeout == 0 {
		return 2 * time.Minute
	}
	return job.CatchUpTimeout
}

// files are what the spare needs before its member is added: the etcd binary, the certificates
// (keys 0600) and the marker hactl recognises its data dirs by. Readers are closed by closeAll.
func (job Job) files() ([]provision.File, error) {
	var out []provision.File
	for _, c := range []struct {
		key, path string
		mode      os.FileMode
	}{
		{"ca.crt", etcd.RemoteCACert, 0o644}, {"server.crt", etcd.RemoteServerCert, 0o644}, {"server.key", etcd.RemoteServerKey, 0o600},
		{"peer.crt", etcd.RemotePeerCert, 0o644}, {"peer.key", etcd.RemotePeerKey, 0o600},
	} {
		if len(job.Certificates[c.key]) == 0 {
			return nil, fmt.Errorf("the certificate Secret %s has no %s", job.Spare.CertificatesSecret.Name, c.key)
		}
		out = append(out, provision.File{Path: c.path, Mode: c.mode, Content: job.Certificates[c.key]})
	}
	marker, err := etcd.Marker{Cluster: job.Cluster, Token: job.Template.InitialClusterToken, Member: job.Spare.Name}.File()
	if err != nil {
		return nil, err
	}
	out = append(out, provision.File{Path: etcd.RemoteMarker, Mode: 0o644, Content: marker})
	f, err := os.Open(job.EtcdBinary)
	if err != nil {
		return nil, fmt.Errorf("the etcd binary to install: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return append(out, provision.File{Path: etcd.RemoteEtcdBinary, Mode: 0o755, Reader: f, Size: fi.Size()}), nil
}

func closeAll(files []provision.File) {
	for _, f := range files {
		if c, ok := f.Reader.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
}

// Self is the spare as an etcd.Member (its address, the template's ports). Errors: an address
// that is no IP literal.
func (job Job) Self() (etcd.Member, error) {
	addr, err := netip.ParseAddr(job.Spare.Address)
	if err != nil {
		return etcd.Member{}, fmt.Errorf("spare %s: address %q: %w", job.Spare.Name, job.Spare.Address, err)
	}
	return etcd.Member{Name: job.Spare.Name, Address: addr, ClientPort: int(job.Template.ClientPort), PeerPort: int(job.Template.PeerPort)}, nil
}

func (job Job) peerURL() (string, error) {
	m, err := job.Self()
	return m.PeerURL(), err
}

func (job Job) clientURL() (string, error) {
	m, err := job.Self()
	return m.ClientURL(), err
}

// unitConfig is the spare's etcd.service as hactl renders a member's (etcd.NewUnitConfig from the
// template), with --initial-cluster the member list members (membership.JoinInitialCluster, the new
// member id as job.Spare.Name) and --initial-cluster-state existing.
func (job Job) unitConfig(members []*etcdserverpb.Member, id uint64) (etcd.UnitConfig, error) {
	self, err := job.Self()
	if err != nil {
		return etcd.UnitConfig{}, err
	}
	t := job.Template
	c := &v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{Etcd: v1alpha1.Etcd{
		Version: t.Version, DataDir: t.DataDir, ClientPort: int(t.ClientPort), PeerPort: int(t.PeerPort),
		HeartbeatInterval: v1alpha1.Duration{Duration: t.HeartbeatInterval.Duration}, ElectionTimeout: v1alpha1.Duration{Duration: job.ElectionTimeout},
		QuotaBackendBytes: t.QuotaBackendBytes, AutoCompaction: v1alpha1.AutoCompaction{Mode: t.AutoCompactionMode, Retention: t.AutoCompactionRetention},
		MetricsAddress: t.MetricsAddress,
	}}}
	u := etcd.NewUnitConfig(c, nil, self, etcd.StateExisting, t.InitialClusterToken)
	if u.InitialCluster, err = membership.JoinInitialCluster(members, id, job.Spare.Name, nil); err != nil {
		return etcd.UnitConfig{}, err
	}
	return u, u.Validate()
}

func parseID(hex string) (uint64, error) {
	if hex == "" {
		return 0, errors.New("empty member ID")
	}
	return strconv.ParseUint(hex, 16, 64)
}

func (job Job) now() time.Time {
	if job.Now != nil {
		return job.Now()
	}
	return time.Now()
}

func (job Job) logf(format string, args ...any) {
	if job.Logf != nil {
		job.Logf(format, args...)
	}
}
