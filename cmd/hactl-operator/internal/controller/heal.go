package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/heal"
	"github.com/hactl/hactl/operator/observe"
	"github.com/hactl/hactl/provision"
)

// Heal's bounds.
const (
	// healMaxAttempts is how many times one step is tried (one try per requeue) before the heal
	// is rolled back and recorded as failed.
	healMaxAttempts = 10
	// healRetryEvery is the requeue while a heal is in progress.
	healRetryEvery = 5 * time.Second
	// healBudget bounds the steps run in one reconcile (the caught-up wait is the longest).
	healBudget = 4 * time.Minute
	// maxHealRecords is how many finished heals status.heals keeps.
	maxHealRecords = 10
)

// Secret key of spec.healing.sshKeySecret.
const SecretSSHKey = corev1.SSHAuthPrivateKey

// planHeal runs inside the status write after observe.Apply: the heal decision, the Healing
// condition and, for a start, status.healing's first record (step Planned, the order etcd allows).
func planHeal(ec *hactlv1.EtcdCluster, st *hactlv1.EtcdClusterStatus, look observe.Look, now time.Time) observe.HealDecision {
	cs := look.Status
	if look.CredentialsErr != nil {
		cs = nil
	}
	d := observe.Decide(ec.Spec, st, cs, now)
	if c := findCondition(st.Conditions, hactlv1.ConditionHealing); d.Action == observe.HealNothing && c != nil {
		switch {
		case c.Reason == observe.ReasonGracePeriod:
			d.Reason, d.Message = observe.ReasonMemberRecovered, "answers again within the grace period, no heal: "+c.Message
		case c.Reason == observe.ReasonHealSucceeded && d.Reason == observe.ReasonAllMembersServe:
			// The last heal's outcome, with what cluster.yaml must now say, stays the condition's
			// message while every member serves: `kubectl get etcdcluster` shows it, not only
			// status.heals and an event that expires.
			d.Reason, d.Message = c.Reason, c.Message
		}
	}
	if d.Action == observe.HealStart {
		id, _ := strconv.ParseUint(d.MemberID, 16, 64)
		order, why := membership.ReplaceOrder(observe.Voters(cs, st), id)
		st.Healing = heal.Begin(d.Member, d.MemberID, d.Spare, order, now)
		d.Message += "; " + order + ": " + why
	}
	observe.SetHealing(st, ec.Generation, d, now)
	return d
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// healStep carries on the heal recorded in ec's status.healing: the steps of operator/heal, each
// recorded in the status before the next, until the heal is finished, a step fails (recorded with
// the attempt count; retried at the next requeue), the step has failed healMaxAttempts times or
// cannot succeed (a pinned host key refused, a spare no longer listed, the image's etcd of
// another version): then it is rolled back and recorded as failed. It returns the requeue.
func (r *EtcdClusterReconciler) healStep(ctx context.Context, ec *hactlv1.EtcdCluster) (time.Duration, error) {
	if ec.Status.Healing == nil || ec.Spec.Healing == nil {
		return 0, nil
	}
	logger := log.FromContext(ctx).WithValues("member", ec.Status.Healing.Member, "spare", ec.Status.Healing.Spare)
	hs := ec.Status.Healing.DeepCopy()
	env, err := r.healEnv(ctx, ec, hs)
	if env != nil {
		defer env.close()
	}
	if err != nil {
		return r.healFailedStep(ctx, ec, hs, env, err)
	}
	hctx, cancel := context.WithTimeout(ctx, healBudget)
	defer cancel()
	for {
		from := hs.Step
		finished, err := heal.Advance(hctx, env.job, env.cluster, env.host, hs)
		if err != nil {
			return r.healFailedStep(ctx, ec, hs, env, err)
		}
		logger.Info("heal step done", "step", from, "next", hs.Step, "finished", finished)
		if finished {
			return 0, r.finishHeal(ctx, ec, hs, env)
		}
		if err := r.recordHeal(ctx, ec, hs, fmt.Sprintf("replacing %s (ID %s) by a member on %s: %s done, now %s", hs.Member, hs.MemberID, hs.Spare, from, hs.Step)); err != nil {
			return 0, err
		}
		if hctx.Err() != nil {
			return healRetryEvery, nil
		}
	}
}

// recordHeal writes hs as status.healing with the Healing condition's message msg.
func (r *EtcdClusterReconciler) recordHeal(ctx context.Context, ec *hactlv1.EtcdCluster, hs *hactlv1.HealingStatus, msg string) error {
	now := r.now()
	return r.writeStatus(ctx, ec, func(st *hactlv1.EtcdClusterStatus) {
		st.Healing = hs.DeepCopy()
		observe.SetHealing(st, ec.Generation, observe.HealDecision{Action: observe.HealContinue, Reason: observe.ReasonHealing, Message: msg}, now)
	})
}

// healFailedStep records a failed step; a permanent failure, or the last attempt, ends the heal.
func (r *EtcdClusterReconciler) healFailedStep(ctx context.Context, ec *hactlv1.EtcdCluster, hs *hactlv1.HealingStatus, env *healEnv, stepErr error) (time.Duration, error) {
	stepErr = explainHostKey(stepErr, hs.Spare)
	hs.Attempts++
	hs.LastError = stepErr.Error()
	if permanent(stepErr) || hs.Attempts >= healMaxAttempts {
		return 0, r.failHeal(ctx, ec, hs, env, stepErr)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, corev1.EventTypeWarning, observe.ReasonHealStepFailed, "Heal", "step %s, attempt %d of %d: %v", hs.Step, hs.Attempts, healMaxAttempts, stepErr)
	}
	msg := fmt.Sprintf("replacing %s by a member on %s: step %s failed (attempt %d of %d): %v", hs.Member, hs.Spare, hs.Step, hs.Attempts, healMaxAttempts, stepErr)
	return healRetryEvery, r.recordHeal(ctx, ec, hs, msg)
}

// permanent reports whether err can't be cured by trying again: a refused host key, or a heal
// that can't be set up (errPermanent).
func permanent(err error) bool {
	var hk *provision.HostKeyError
	return errors.As(err, &hk) || errors.Is(err, errPermanent)
}

var errPermanent = errors.New("the heal cannot succeed")

// explainHostKey rewords a refused host key for the operator (provision's message advises a
// known_hosts edit and a CLI flag, neither of which applies here); other errors are returned as
// they are. The result still wraps the *provision.HostKeyError.
func explainHostKey(err error, spare string) error {
	var hk *provision.HostKeyError
	if !errors.As(err, &hk) {
		return err
	}
	var pinned []string
	for _, k := range hk.Known {
		pinned = append(pinned, ssh.FingerprintSHA256(k.Key))
	}
	return fmt.Errorf("spare %s offered SSH host key %s %s, which is not pinned in spec.healing.spares[].hostKeys (%s): the heal stopped. If the spare was reinstalled, check the new key with its owner, put it into cluster.yaml's known_hosts and run hactl operator deploy again: %w",
		spare, hk.Key.Type(), hk.Fingerprint(), strings.Join(pinned, ", "), hk)
}

// failHeal rolls the heal back (operator/heal.RollBack, best effort) and records it as failed:
// status.heals, no status.healing, the Healing condition False with the error, an event.
func (r *EtcdClusterReconciler) failHeal(ctx context.Context, ec *hactlv1.EtcdCluster, hs *hactlv1.HealingStatus, env *healEnv, cause error) error {
	msg := cause.Error()
	if env != nil && env.cluster != nil {
		var host heal.Host
		if env.host.target.Address != "" {
			host = env.host
		}
		if err := heal.RollBack(ctx, env.job, env.cluster, host, hs); err != nil {
			msg += "; rolling back: " + err.Error()
		}
	}
	rec := hactlv1.HealRecord{Member: hs.Member, MemberID: hs.MemberID, Spare: hs.Spare, NewMemberID: hs.NewMemberID, Result: hactlv1.HealFailed,
		Message: fmt.Sprintf("step %s: %s", hs.Step, msg), StartedAt: hs.StartedAt, FinishedAt: metav1.NewTime(r.now())}
	metricHeals.WithLabelValues(ec.Namespace+"/"+ec.Name, string(hactlv1.HealFailed)).Inc()
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, corev1.EventTypeWarning, observe.ReasonHealFailed, "Heal", "replacing %s by a member on %s failed at step %s, rolled back: %s", hs.Member, hs.Spare, hs.Step, msg)
	}
	now := r.now()
	return r.writeStatus(ctx, ec, func(st *hactlv1.EtcdClusterStatus) {
		st.Healing = nil
		st.Heals = appendHeal(st.Heals, rec)
		observe.SetHealing(st, ec.Generation, observe.HealDecision{Action: observe.HealReport, Reason: observe.ReasonHealFailed,
			Message: fmt.Sprintf("replacing %s by a member on %s failed (%s); the next attempt after %s", hs.Member, hs.Spare, rec.Message, observe.HealRetryAfter)}, now)
	})
}

// finishHeal records a heal that is done: spec.members gets the new member in the lost one's
// place and spec.healing.spares loses the spare (one update, retried on conflicts), then the
// status gets the record in status.heals and loses status.healing, and the Healing condition and
// an event say what hactl's spec should now say.
func (r *EtcdClusterReconciler) finishHeal(ctx context.Context, ec *hactlv1.EtcdCluster, hs *hactlv1.HealingStatus, env *healEnv) error {
	clientURL := etcd.URL("https", env.self.Address, env.self.ClientPort)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur hactlv1.EtcdCluster
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(ec), &cur); err != nil {
			return err
		}
		spec := &cur.Spec
		i := slices.IndexFunc(spec.Members, func(m hactlv1.MemberEndpoint) bool { return m.Name == hs.Member })
		newMember := hactlv1.MemberEndpoint{Name: hs.Spare, ClientURL: clientURL, Zone: env.job.Spare.Zone}
		switch {
		case slices.ContainsFunc(spec.Members, func(m hactlv1.MemberEndpoint) bool { return m.Name == hs.Spare }):
			// recorded by an earlier try whose status write was lost
		case i >= 0:
			spec.Members[i] = newMember
		default:
			spec.Members = append(spec.Members, newMember)
		}
		if spec.Healing != nil {
			spec.Healing.Spares = slices.DeleteFunc(spec.Healing.Spares, func(s hactlv1.SpareHost) bool { return s.Name == hs.Spare })
		}
		if err := r.Client.Update(ctx, &cur); err != nil {
			return err
		}
		ec.Spec, ec.ObjectMeta = cur.Spec, cur.ObjectMeta
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording the new member %s in spec.members: %w", hs.Spare, err)
	}
	now := r.now()
	rec := hactlv1.HealRecord{Member: hs.Member, MemberID: hs.MemberID, Spare: hs.Spare, NewMemberID: hs.NewMemberID, Result: hactlv1.HealSucceeded,
		ClientURL: clientURL, PeerURL: env.self.PeerURL(), InitialCluster: hs.InitialCluster,
		Message: fmt.Sprintf("%s (ID %s) replaced by %s (ID %s, %s): move %s into the etcd hosts of cluster.yaml in place of %s (hactl operator adopt records it in hactl's state dir)",
			hs.Member, hs.MemberID, hs.Spare, hs.NewMemberID, clientURL, hs.Spare, hs.Member),
		StartedAt: hs.StartedAt, FinishedAt: metav1.NewTime(now)}
	metricHeals.WithLabelValues(ec.Namespace+"/"+ec.Name, string(hactlv1.HealSucceeded)).Inc()
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, corev1.EventTypeNormal, observe.ReasonHealSucceeded, "Heal", "%s in %s", rec.Message, now.Sub(hs.StartedAt.Time).Round(time.Second))
	}
	return r.writeStatus(ctx, ec, func(st *hactlv1.EtcdClusterStatus) {
		st.Healing = nil
		st.Heals = appendHeal(st.Heals, rec)
		observe.SetHealing(st, ec.Generation, observe.HealDecision{Action: observe.HealReport, Reason: observe.ReasonHealSucceeded, Message: rec.Message}, now)
	})
}

func appendHeal(heals []hactlv1.HealRecord, rec hactlv1.HealRecord) []hactlv1.HealRecord {
	heals = append(heals, rec)
	if len(heals) > maxHealRecords {
		heals = heals[len(heals)-maxHealRecords:]
	}
	return heals
}

// healEnv is what one reconcile's heal steps use.
type healEnv struct {
	job     heal.Job
	self    etcd.Member
	cluster *clientv3.Client
	host    *lazyHost
	dir     string
}

func (e *healEnv) close() {
	if e.cluster != nil {
		e.cluster.Close()
	}
	e.host.close()
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// healEnv reads what the heal of hs needs: the spare in spec.healing.spares, its certificate
// Secret, the SSH key Secret, the member template, an etcd client to the members other than the
// lost one, and the spare's SSH connection (made at first use, its host keys pinned). Errors
// wrapping errPermanent can't be cured by waiting: a spare no longer listed, no member template,
// the image's etcd not of the members' version.
func (r *EtcdClusterReconciler) healEnv(ctx context.Context, ec *hactlv1.EtcdCluster, hs *hactlv1.HealingStatus) (*healEnv, error) {
	h := ec.Spec.Healing
	i := slices.IndexFunc(h.Spares, func(s hactlv1.SpareHost) bool { return s.Name == hs.Spare })
	if i < 0 {
		// A retry after the spec update of a finished heal: the spare is a member now.
		if !slices.ContainsFunc(ec.Spec.Members, func(m hactlv1.MemberEndpoint) bool { return m.Name == hs.Spare }) {
			return nil, fmt.Errorf("spare %s is no longer in spec.healing.spares: %w", hs.Spare, errPermanent)
		}
	}
	if h.Member == nil {
		return nil, fmt.Errorf("spec.healing.member is not set (hactl operator deploy sets it): %w", errPermanent)
	}
	var spare hactlv1.SpareHost
	if i >= 0 {
		spare = h.Spares[i]
	} else {
		spare = recordedSpare(ec, hs)
	}
	env := &healEnv{host: newLazyHost()}
	if err := r.checkEtcdBinary(ec, h.Member.Version); err != nil {
		return env, err
	}
	certs, err := r.secretData(ctx, ec.Namespace, spare.CertificatesSecret.Name)
	if err != nil {
		return env, err
	}
	env.job = heal.Job{Cluster: ec.Name, Spare: spare, Template: *h.Member, ElectionTimeout: electionTimeout(ec), Certificates: certs, EtcdBinary: r.EtcdBinary,
		Now: r.now, Logf: func(format string, args ...any) { log.FromContext(ctx).Info(fmt.Sprintf(format, args...)) }}
	if env.self, err = selfOf(spare, h.Member); err != nil {
		return env, fmt.Errorf("%w: %w", err, errPermanent)
	}
	cfg, err := r.clientTLS(ctx, ec)
	if err != nil {
		return env, err
	}
	var endpoints []string
	for _, m := range ec.Spec.Members {
		if m.Name != hs.Member {
			endpoints = append(endpoints, m.ClientURL)
		}
	}
	cli, err := etcd.NewClientWithConfig(ctx, endpoints, cfg, r.DialTimeout)
	if err != nil {
		return env, err
	}
	env.cluster = cli
	if h.SSHKeySecret == nil {
		return env, fmt.Errorf("spec.healing.sshKeySecret is not set: %w", errPermanent)
	}
	key, err := r.secretData(ctx, ec.Namespace, h.SSHKeySecret.Name)
	if err != nil {
		return env, err
	}
	if len(key[SecretSSHKey]) == 0 {
		return env, fmt.Errorf("Secret %s/%s has no %s", ec.Namespace, h.SSHKeySecret.Name, SecretSSHKey)
	}
	if env.dir, err = os.MkdirTemp("", "hactl-heal-"); err != nil {
		return env, err
	}
	known, err := knownHostsFor(spare)
	if err != nil {
		return env, fmt.Errorf("spare %s: %w: %w", spare.Name, err, errPermanent)
	}
	pcfg := provision.Config{User: h.SSHUser, IdentityFile: filepath.Join(env.dir, "id"), KnownHostsFile: filepath.Join(env.dir, "known_hosts"),
		Agent: "never", ConnectTimeout: 10 * time.Second}
	if pcfg.User == "" {
		pcfg.User = "root"
	}
	for path, data := range map[string][]byte{pcfg.IdentityFile: key[SecretSSHKey], pcfg.KnownHostsFile: known} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return env, err
		}
	}
	env.host.target = provision.Target{Name: spare.Name, Address: spare.Address, Port: int(spare.SSHPort)}
	env.host.cfg = pcfg
	return env, nil
}

// recordedSpare rebuilds the spare of a heal whose spec update already happened (the spare moved
// from spec.healing.spares into spec.members): what the last steps need of it is its name and
// zone.
func recordedSpare(ec *hactlv1.EtcdCluster, hs *hactlv1.HealingStatus) hactlv1.SpareHost {
	for _, m := range ec.Spec.Members {
		if m.Name == hs.Spare {
			return hactlv1.SpareHost{Name: m.Name, Zone: m.Zone}
		}
	}
	return hactlv1.SpareHost{Name: hs.Spare}
}

func selfOf(s hactlv1.SpareHost, t *hactlv1.MemberTemplate) (etcd.Member, error) {
	job := heal.Job{Spare: s, Template: *t}
	return job.Self()
}

func electionTimeout(ec *hactlv1.EtcdCluster) time.Duration {
	if ec.Spec.ElectionTimeout != nil {
		return ec.Spec.ElectionTimeout.Duration
	}
	return time.Second
}

// knownHostsFor is a known_hosts file holding the spare's pinned host keys.
func knownHostsFor(s hactlv1.SpareHost) ([]byte, error) {
	port := int(s.SSHPort)
	if port == 0 {
		port = 22
	}
	addr := s.Address
	if port != 22 {
		addr = "[" + s.Address + "]:" + strconv.Itoa(port)
	}
	var b strings.Builder
	for _, line := range s.HostKeys {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("pinned host key %q: %w", line, err)
		}
		b.WriteString(knownhosts.Line([]string{addr}, k) + "\n")
	}
	return []byte(b.String()), nil
}

func (r *EtcdClusterReconciler) secretData(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	var s corev1.Secret
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", namespace, name, err)
	}
	return s.Data, nil
}

var etcdVersionRE = regexp.MustCompile(`(?m)^etcd Version: (\S+)$`)

// checkEtcdBinary runs the etcd binary a heal installs (`etcd --version`) and checks it reports
// want, the version of the template and of every member that answered. Errors wrap errPermanent
// (another image is the cure).
func (r *EtcdClusterReconciler) checkEtcdBinary(ec *hactlv1.EtcdCluster, want string) error {
	r.binOnce.Do(func() {
		out, err := exec.Command(r.EtcdBinary, "--version").Output()
		if err != nil {
			r.binErr = fmt.Errorf("%s --version: %w", r.EtcdBinary, err)
			return
		}
		m := etcdVersionRE.FindSubmatch(out)
		if m == nil {
			r.binErr = fmt.Errorf("%s --version printed no version: %q", r.EtcdBinary, out)
			return
		}
		r.binVersion = string(m[1])
	})
	if r.binErr != nil {
		return fmt.Errorf("%w: %w", r.binErr, errPermanent)
	}
	want = strings.TrimPrefix(want, "v")
	if r.binVersion != want {
		return fmt.Errorf("the operator image's etcd is %s but spec.healing.member.version is v%s: deploy an image with etcd v%s (make operator-image HACTL_OPERATOR_ETCD=...): %w", r.binVersion, want, want, errPermanent)
	}
	for _, m := range ec.Status.Members {
		if m.Version != "" && m.Version != want {
			return fmt.Errorf("member %s runs etcd %s, not spec.healing.member.version v%s: finish the upgrade (hactl bootstrap) first: %w", m.Name, m.Version, want, errPermanent)
		}
	}
	return nil
}

// lazyHost dials the spare at its first use, so steps that need only etcd (removing the lost
// member) do not depend on it: a provision.Pool of the one host, dialled with cfg (set, with
// target, before the first use; newLazyHost builds it).
type lazyHost struct {
	target provision.Target
	cfg    provision.Config
	pool   *provision.Pool[*provision.Client]
}

// newLazyHost returns a lazyHost whose pool dials with h.cfg as it is at the dial.
func newLazyHost() *lazyHost {
	h := &lazyHost{}
	h.pool = provision.NewPoolFunc(func(ctx context.Context, t provision.Target) (*provision.Client, error) {
		return provision.Dial(ctx, t, h.cfg)
	})
	return h
}

func (h *lazyHost) Upload(ctx context.Context, step string, files []provision.File) error {
	c, err := h.pool.Client(ctx, h.target)
	if err != nil {
		return err
	}
	return c.Upload(ctx, step, files)
}

func (h *lazyHost) Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error) {
	c, err := h.pool.Client(ctx, h.target)
	if err != nil {
		return provision.Result{}, err
	}
	return c.Run(ctx, step, command, opts...)
}

func (h *lazyHost) close() {
	if h == nil {
		return
	}
	_ = h.pool.Close()
}
