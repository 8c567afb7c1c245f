package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// kubeletMaxBackoff is kubelet's longest crash-loop back-off (MaxContainerBackOff).
const kubeletMaxBackoff = 5 * time.Minute

// pollEvery is how often the drill looks at what the watches delivered.
const pollEvery = 20 * time.Millisecond

// BoundByAnnotation is RecordingBinder's annotation (scheduler/plugins/bindrecorder).
const BoundByAnnotation = "scheduler.hactl.io/bound-by"

// Options configure a Lease drill.
type Options struct {
	API kubernetes.Interface
	// Via names how the API is reached, for the report.
	Via string
	// Cluster and Dialer: the cluster hactl built (static pods, killed over SSH); nil through a
	// kubeconfig (the holder's pod is deleted).
	Cluster *v1alpha1.Cluster
	Dialer  *provision.Dialer
	Target  Target
	Method  string
	// SchedulerName is the workload pods' schedulerName ("": no workload, e.g. for
	// kube-controller-manager's Lease); PodImage their image.
	SchedulerName string
	PodImage      string
	Rate          int
	Count         int
	MaxRTO        time.Duration
	// Timeout bounds one iteration's wait for the takeover and the put-back.
	Timeout time.Duration
	DryRun  bool
	Confirm func(question string) (bool, error)
	Printer *ui.Printer
	// Report, when set, is where the JSON report is written (atomically) once it exists.
	Report string
	// Slots, when set, are checked after each takeover: one action per slot (hactl-operator's
	// scheduled snapshots), none doubled or skipped.
	Slots []SlotCheck
}

// Validate checks the options locally; errors are *drill.InputError (exit 2).
func (o *Options) Validate() error {
	if o.Method != MethodProcess && o.Method != MethodGraceful {
		return &drill.InputError{Err: fmt.Errorf("--method %s: a Lease drill takes process (SIGKILL of the holder's container; through a kubeconfig its pod deleted with no grace) or graceful (SIGTERM; through a kubeconfig the pod's grace period)", o.Method)}
	}
	if o.Count < 1 {
		return &drill.InputError{Err: fmt.Errorf("--count %d: must be at least 1", o.Count)}
	}
	if o.Rate < 1 || o.Rate > 50 {
		return &drill.InputError{Err: fmt.Errorf("--pod-rate %d: pods per second, 1-50", o.Rate)}
	}
	if o.SchedulerName != "" {
		if errs := validation.IsDNS1123Subdomain(o.SchedulerName); len(errs) > 0 {
			return &drill.InputError{Err: fmt.Errorf("--scheduler-name %q: %s", o.SchedulerName, strings.Join(errs, "; "))}
		}
	}
	if o.PodImage != "" && !v1alpha1.IsImageReference(o.PodImage) {
		return &drill.InputError{Err: fmt.Errorf("--pod-image %q: an image reference [REGISTRY[:PORT]/]PATH[:TAG][@sha256:DIGEST], e.g. registry.k8s.io/pause:3.10.2", o.PodImage)}
	}
	switch {
	case o.MaxRTO < 0:
		return &drill.InputError{Err: fmt.Errorf("--max-rto %s: a positive duration (default %s)", o.MaxRTO, DefaultMaxRTO)}
	case o.MaxRTO == 0:
		o.MaxRTO = DefaultMaxRTO
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Report != "" {
		return drill.CheckReportPath(o.Report)
	}
	return nil
}

// ContainerName is the container of the static pod that holds target's Lease: kube-scheduler's and
// kube-controller-manager's own, else hactl-scheduler's.
func ContainerName(t Target) string {
	if t.Name == "kube-scheduler" || t.Name == "kube-controller-manager" {
		return t.Name
	}
	return "hactl-scheduler"
}

// Run does the drill: Count iterations, each taking down the Lease's holder and measuring; the
// report is returned also on failure. Errors: *drill.InputError or *drill.RefusedError before
// anything is touched (no holder, holder not a host of the spec or a pod); *drill.VerdictError
// (exit 3) when an iteration failed its checks; runtime errors naming the step.
func Run(ctx context.Context, o *Options) (*Report, error) {
	rep := &Report{Drill: "kill-leader", Target: o.Target.String(), Via: o.Via, Method: o.Method, Scheduler: o.SchedulerName,
		Rate: o.Rate, MaxRTOMs: ms(o.MaxRTO), ResolutionMs: ms(pollEvery), Started: time.Now().UTC()}
	defer func() {
		if o.Report != "" {
			if err := drill.WriteJSON(o.Report, rep); err != nil {
				o.Printer.Warnf("%v", err)
			}
		}
	}()
	l, err := o.API.CoordinationV1().Leases(o.Target.Namespace).Get(ctx, o.Target.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, &drill.RefusedError{Reasons: []string{fmt.Sprintf("%s does not exist (no replica elected there yet)", o.Target)}, Fix: "deploy the component first, or name another Lease (kubectl get leases -A)"}
	case err != nil:
		return nil, fmt.Errorf("reading %s via %s: %w", o.Target, o.Via, err)
	}
	holder := holderOf(l)
	if holder == "" {
		return nil, &drill.RefusedError{Reasons: []string{o.Target.String() + " has no holder: nothing to take down"}, Fix: "wait for a replica to take the Lease (hactl scheduler status)"}
	}
	victim, err := o.victim(ctx, holder)
	if err != nil {
		return nil, err
	}
	plan := []string{
		fmt.Sprintf("%s is held by %s (%s)", o.Target, holder, victim),
		fmt.Sprintf("%d iteration(s): %s the holder, measure on this machine's clock from watch events until another identity holds the Lease (budget --max-rto %s)", o.Count, o.faultWord(), o.MaxRTO),
	}
	if o.SchedulerName != "" {
		plan = append(plan, fmt.Sprintf("meanwhile %d pods/s with schedulerName %s in namespace %s (deleted once bound), each binding's identity and revision recorded", o.Rate, o.SchedulerName, Namespace))
	}
	for _, c := range o.Slots {
		plan = append(plan, fmt.Sprintf("then count the %s Events of %s/%s per %s slot, from the fault's slot to the takeover's: each must have exactly one (none doubled, none skipped)", c.Reason, c.Namespace, c.Regarding, c.Every))
	}
	plan = append(plan, "put back: kubelet restarts the container / the Deployment makes a new pod; the drill waits until the replica is Ready again")
	for _, line := range plan {
		o.Printer.Infof("plan: %s", line)
	}
	if o.DryRun {
		rep.Result = "dry-run"
		return rep, nil
	}
	if o.Confirm != nil {
		ok, err := o.Confirm("Run the drill?")
		if err != nil {
			return rep, err
		}
		if !ok {
			return rep, errors.New("not confirmed: nothing was changed")
		}
	}
	if o.SchedulerName != "" {
		if err := ensureNamespace(ctx, o.API); err != nil {
			return rep, err
		}
	}
	var failures []string
	for i := range o.Count {
		it, err := o.iteration(ctx, i)
		rep.Iter = append(rep.Iter, it)
		if err != nil {
			rep.Error = err.Error()
			rep.Result = "error"
			return rep, err
		}
		for _, f := range it.failures(o.MaxRTO) {
			failures = append(failures, fmt.Sprintf("iteration %d: %s", i+1, f))
		}
	}
	rep.Failures = failures
	rep.Result = "pass"
	if len(failures) > 0 {
		rep.Result = "fail"
		return rep, &drill.VerdictError{Failures: failures}
	}
	return rep, nil
}

func (o *Options) faultWord() string {
	switch {
	case o.Cluster != nil && o.Method == MethodProcess:
		return "SIGKILL the container of"
	case o.Cluster != nil:
		return "SIGTERM the container of"
	case o.Method == MethodProcess:
		return "delete with no grace the pod of"
	}
	return "delete with its grace period the pod of"
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// HostOf is the hostname part of a holderIdentity (client-go's leader election: hostname "_" UUID).
func HostOf(holder string) string {
	h, _, _ := strings.Cut(holder, "_")
	return h
}

// victim finds the holder's replica: the spec host whose name is the identity's hostname (static
// pods on the host network), else the pod of that name.
func (o *Options) victim(ctx context.Context, holder string) (string, error) {
	host := HostOf(holder)
	if o.Cluster != nil {
		for _, h := range o.Cluster.ControlPlaneHosts() {
			if h.Name == host {
				return "container " + ContainerName(o.Target) + " on " + h.Name, nil
			}
		}
		return "", &drill.RefusedError{Reasons: []string{fmt.Sprintf("the holder %s is not a control-plane host of the spec", holder)},
			Fix: "for a replica that runs as a pod (a Deployment), pass --kubeconfig: the drill deletes the holder's pod"}
	}
	pods, err := o.API.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", host).String()})
	if err != nil {
		return "", fmt.Errorf("finding the holder's pod %s: %w", host, err)
	}
	if len(pods.Items) != 1 {
		// A static pod's holder identity is its node's hostname; deleting its mirror pod through the
		// API would not stop it.
		if _, nerr := o.API.CoreV1().Nodes().Get(ctx, host, metav1.GetOptions{}); nerr == nil {
			return "", &drill.RefusedError{Reasons: []string{fmt.Sprintf("the holder %s is a static pod on node %s: the API cannot stop it (deleting a mirror pod leaves the container running)", holder, host)},
				Fix: "run the drill over SSH with the cluster's spec (-f cluster.yaml, without --kubeconfig)"}
		}
		return "", &drill.RefusedError{Reasons: []string{fmt.Sprintf("no single pod named %s (the holder %s's hostname)", host, holder)}, Fix: "check kubectl get pods -A -o wide"}
	}
	return "pod " + pods.Items[0].Namespace + "/" + host, nil
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "hactl"}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", Namespace, err)
	}
	return nil
}

// observer records, on this machine's clock, the Lease's holders and the workload's bindings.
type observer struct {
	mu      sync.Mutex
	holders []holderEvent
	created map[string]time.Time
	bound   map[string]binding
	pending int
	peak    int
}

type holderEvent struct {
	at     time.Time
	holder string
}

type binding struct {
	at       time.Time
	rev      uint64
	identity string
}

func (ob *observer) lease(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	ob.mu.Lock()
	ob.holders = append(ob.holders, holderEvent{time.Now(), holderOf(l)})
	ob.mu.Unlock()
}

// pod records the first event that shows p bound: the binding's revision and identity are on it.
func (ob *observer) pod(obj any) (string, bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return "", false
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if _, seen := ob.bound[p.Name]; seen {
		return "", false
	}
	rev, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
	ob.bound[p.Name] = binding{at: time.Now(), rev: rev, identity: p.Annotations[BoundByAnnotation]}
	ob.pending--
	return p.Name, true
}

func (o *Options) iteration(ctx context.Context, i int) (Iteration, error) {
	var it Iteration
	id := newID()
	ob := &observer{created: map[string]time.Time{}, bound: map[string]binding{}}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()

	var podWG sync.WaitGroup
	if err := o.watch(ctx, ictx, ob, id, &podWG); err != nil {
		return it, err
	}
	ob.mu.Lock()
	if len(ob.holders) > 0 {
		it.OldHolder = ob.holders[len(ob.holders)-1].holder
	}
	ob.mu.Unlock()
	if it.OldHolder == "" {
		return it, fmt.Errorf("%s has no holder before iteration %d", o.Target, i+1)
	}
	victim, err := o.victim(ctx, it.OldHolder)
	if err != nil {
		return it, err
	}
	it.Killed = victim

	wl := o.startWorkload(ictx, ob, id)
	before, err := o.replicaState(ctx, victim)
	if err != nil {
		return it, err
	}
	verb, _, _ := strings.Cut(o.faultWord(), " the ")
	o.Printer.Infof("iteration %d: %s %s (holder %s)", i+1, verb, victim, it.OldHolder)
	if err := o.fault(ctx, victim); err != nil {
		close(wl.stop)
		return it, fmt.Errorf("fault: %w", err)
	}
	// t0 is when the fault had been done (the signal sent on the host, the deletion accepted): the
	// clock of every figure starts there.
	t0 := time.Now()
	o.awaitTakeover(&it, ob, t0)
	if o.SchedulerName != "" {
		close(wl.stop)
		<-wl.done
		// Every pod created must be bound (give the new leader 30 s for the backlog).
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			ob.mu.Lock()
			defer ob.mu.Unlock()
			return len(ob.bound) >= len(ob.created), nil
		})
	}
	if wl.err != nil {
		o.Printer.Warnf("iteration %d: creating workload pods: %v", i+1, wl.err)
	}
	o.measure(&it, ob, t0)
	if it.PodsBound < it.PodsCreated {
		it.Unbound = o.unbound(ctx, ob)
	}
	if it.TakeoverMs != nil {
		o.Printer.Infof("iteration %d: %s holds the Lease %s after the fault", i+1, it.NewHolder, fmtMs(it.TakeoverMs))
	} else {
		o.Printer.Warnf("iteration %d: no other identity took the Lease within %s", i+1, o.Timeout)
	}
	// Put back: the replica Ready again.
	o.Printer.Infof("iteration %d: put back: waiting until %d replica(s) of %s are Ready again", i+1, before.ready, before.selector)
	if err := o.waitBack(ctx, victim, before); err != nil {
		return it, err
	}
	podWG.Wait()
	if err := o.countSlots(ctx, &it, i, t0); err != nil {
		return it, err
	}
	if o.SchedulerName != "" {
		zero := int64(0)
		_ = o.API.CoreV1().Pods(Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: DrillLabel + "=" + id})
	}
	it.Verdict = "pass"
	if len(it.failures(o.MaxRTO)) > 0 {
		it.Verdict = "fail"
	}
	o.Printer.Infof("iteration %d: new holder %s after %s; %s", i+1, dash(it.NewHolder), fmtMs(it.TakeoverMs), it.Verdict)
	return it, nil
}

// watch starts the informers of an iteration (until ictx ends) and waits for their caches: the
// Lease's holders into ob and, with a workload, the drill's pods (labelled id), each deleted as
// soon as ob saw it bound (podWG counts the deletions under way, sent with ctx's values but not its
// cancellation). Errors: an informer that did not sync.
func (o *Options) watch(ctx, ictx context.Context, ob *observer, id string, podWG *sync.WaitGroup) error {
	leaseInf := informers.NewSharedInformerFactoryWithOptions(o.API, 0, informers.WithNamespace(o.Target.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.Target.Name).String()
		}))
	li := leaseInf.Coordination().V1().Leases().Informer()
	li.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: ob.lease, UpdateFunc: func(_, n any) { ob.lease(n) }})
	leaseInf.Start(ictx.Done())

	deleteNow := func(name string) {
		podWG.Add(1)
		go func() {
			defer podWG.Done()
			zero := int64(0)
			_ = o.API.CoreV1().Pods(Namespace).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}()
	}
	if o.SchedulerName != "" {
		podInf := informers.NewSharedInformerFactoryWithOptions(o.API, 0, informers.WithNamespace(Namespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = DrillLabel + "=" + id }))
		pi := podInf.Core().V1().Pods().Informer()
		pi.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if n, ok := ob.pod(obj); ok {
					deleteNow(n)
				}
			},
			UpdateFunc: func(_, obj any) {
				if n, ok := ob.pod(obj); ok {
					deleteNow(n)
				}
			},
		})
		podInf.Start(ictx.Done())
		if !cache.WaitForCacheSync(ictx.Done(), pi.HasSynced) {
			return errors.New("pods informer did not sync")
		}
	}
	if !cache.WaitForCacheSync(ictx.Done(), li.HasSynced) {
		return errors.New("Lease informer did not sync")
	}
	return nil
}

// podWorkload is an iteration's workload: closing stop ends it, done is closed once it ended, and
// err is the first pod creation that failed (read only after done).
type podWorkload struct {
	done, stop chan struct{}
	err        error
}

// startWorkload creates one pod (labelled id) every 1/Rate s until stop is closed or ictx ends,
// from 2 s before the fault: it returns 2 s after the first tick was armed. Without a scheduler to
// drill there is no workload (done already closed).
func (o *Options) startWorkload(ictx context.Context, ob *observer, id string) *podWorkload {
	wl := &podWorkload{done: make(chan struct{}), stop: make(chan struct{})}
	if o.SchedulerName == "" {
		close(wl.done)
		return wl
	}
	go func() {
		defer close(wl.done)
		tick := time.NewTicker(time.Second / time.Duration(o.Rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-wl.stop:
				return
			case <-ictx.Done():
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("drill-%s-%d", id, n)
			ob.mu.Lock()
			ob.created[name] = time.Now()
			ob.pending++
			ob.peak = max(ob.peak, ob.pending)
			ob.mu.Unlock()
			if _, err := o.API.CoreV1().Pods(Namespace).Create(ictx, o.pod(name, id), metav1.CreateOptions{}); err != nil {
				// Not created: not a pod that could be bound (the warning says why).
				ob.mu.Lock()
				delete(ob.created, name)
				ob.pending--
				ob.mu.Unlock()
				if wl.err == nil && ictx.Err() == nil {
					wl.err = err
				}
			}
		}
	}()
	time.Sleep(2 * time.Second)
	return wl
}

// awaitTakeover watches ob, for at most Timeout from t0, until another identity than it.OldHolder
// holds the Lease and (with a workload) a pod was bound after t0, then 3 s more; it sets
// it.NewHolder and it.TakeoverMs (ms from t0 to the first such holder), or clears them.
func (o *Options) awaitTakeover(it *Iteration, ob *observer, t0 time.Time) {
	deadline := t0.Add(o.Timeout)
	var done time.Time
	for time.Now().Before(deadline) {
		ob.mu.Lock()
		it.NewHolder, it.TakeoverMs = "", nil
		for _, h := range ob.holders {
			if h.at.After(t0) && h.holder != "" && h.holder != it.OldHolder {
				it.NewHolder, it.TakeoverMs = h.holder, msp(h.at.Sub(t0))
				break
			}
		}
		boundAfter := o.SchedulerName == ""
		for _, b := range ob.bound {
			if b.at.After(t0) {
				boundAfter = true
			}
		}
		ob.mu.Unlock()
		if it.NewHolder != "" && boundAfter {
			if done.IsZero() {
				done = time.Now()
			}
			if time.Since(done) > 3*time.Second {
				break
			}
		}
		time.Sleep(pollEvery)
	}
}

// countSlots appends to it.Slots, when another identity took the Lease, each Slots check's count of
// Events per slot around the takeover. Errors: "slot check: %w".
func (o *Options) countSlots(ctx context.Context, it *Iteration, i int, t0 time.Time) error {
	if it.TakeoverMs == nil {
		return nil
	}
	takeover := t0.Add(time.Duration(*it.TakeoverMs * float64(time.Millisecond)))
	for _, c := range o.Slots {
		o.Printer.Infof("iteration %d: counting the %s Events of %s/%s per slot", i+1, c.Reason, c.Namespace, c.Regarding)
		ss, err := c.checkSlots(ctx, o, t0, takeover, o.Timeout)
		if err != nil {
			return fmt.Errorf("slot check: %w", err)
		}
		it.Slots = append(it.Slots, ss...)
	}
	return nil
}

func (o *Options) pod(name, id string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{DrillLabel: id}},
		Spec: corev1.PodSpec{
			SchedulerName:                 o.SchedulerName,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "pause", Image: o.PodImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("1Mi")}}}},
		},
	}
}

// measure fills it from what ob saw: first binding after t0, the longest gap, the peak, the windows.
func (o *Options) measure(it *Iteration, ob *observer, t0 time.Time) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	it.PodsCreated, it.PodsBound, it.PendingPeak = len(ob.created), len(ob.bound), ob.peak
	if o.SchedulerName == "" {
		it.Proof = "no workload (no schedulerName for this Lease)"
		return
	}
	var binds []binding
	for _, b := range ob.bound {
		binds = append(binds, b)
	}
	slices.SortFunc(binds, func(a, b binding) int { return a.at.Compare(b.at) })
	// The old leader may still bind while it shuts down (graceful): the first binding after the
	// fault is the first by another identity when bindings carry one.
	oldBinder := ""
	for _, b := range binds {
		if !b.at.After(t0) {
			oldBinder = b.identity
		}
	}
	var last time.Time
	gap := time.Duration(0)
	for _, b := range binds {
		if b.at.After(t0) && it.FirstBindMs == nil && (b.identity == "" || b.identity != oldBinder) {
			it.FirstBindMs = msp(b.at.Sub(t0))
		}
		if !last.IsZero() {
			gap = max(gap, b.at.Sub(last))
		}
		last = b.at
	}
	it.LongestGapMs = msp(gap)
	windows := map[string]*Window{}
	unannotated := 0
	for _, b := range binds {
		if b.identity == "" {
			unannotated++
			continue
		}
		w, ok := windows[b.identity]
		if !ok {
			w = &Window{Identity: b.identity, FirstRev: b.rev, LastRev: b.rev, FirstMs: ms(b.at.Sub(t0)), LastMs: ms(b.at.Sub(t0))}
			windows[b.identity] = w
		}
		w.Pods++
		w.FirstRev, w.LastRev = min(w.FirstRev, b.rev), max(w.LastRev, b.rev)
		w.FirstMs, w.LastMs = math.Min(w.FirstMs, ms(b.at.Sub(t0))), math.Max(w.LastMs, ms(b.at.Sub(t0)))
	}
	for _, w := range windows {
		it.Windows = append(it.Windows, *w)
	}
	slices.SortFunc(it.Windows, func(a, b Window) int { return int(int64(a.FirstRev) - int64(b.FirstRev)) })
	it.Overlaps = Overlaps(it.Windows)
	switch {
	case unannotated > 0:
		it.Proof = fmt.Sprintf("unavailable: %d pod(s) bound without %s (not hactl-scheduler's RecordingBinder)", unannotated, BoundByAnnotation)
	case len(it.Overlaps) > 0:
		it.Proof = "failed: binding windows overlap"
	default:
		it.Proof = fmt.Sprintf("held: %d identities bound in disjoint revision windows", len(it.Windows))
	}
}

// Overlaps returns "A and B" for every two windows whose revision ranges intersect: two replicas
// that both bound pods while the other was binding too.
func Overlaps(ws []Window) []string {
	var out []string
	for i := range ws {
		for j := i + 1; j < len(ws); j++ {
			a, b := ws[i], ws[j]
			if a.FirstRev <= b.LastRev && b.FirstRev <= a.LastRev {
				out = append(out, fmt.Sprintf("%s (revisions %d-%d) and %s (%d-%d)", a.Identity, a.FirstRev, a.LastRev, b.Identity, b.FirstRev, b.LastRev))
			}
		}
	}
	return out
}

// unbound describes each pod ob saw created but never bound, in name order: "NAME: REASON:
// MESSAGE" from its PodScheduled condition as the API server has it now ("NAME: not scheduled
// yet" without one, "NAME: get: ERR" when it cannot be read).
func (o *Options) unbound(ctx context.Context, ob *observer) []string {
	ob.mu.Lock()
	var names []string
	for n := range ob.created {
		if _, ok := ob.bound[n]; !ok {
			names = append(names, n)
		}
	}
	ob.mu.Unlock()
	slices.Sort(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		p, err := o.API.CoreV1().Pods(Namespace).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			out = append(out, fmt.Sprintf("%s: get: %v", n, err))
			continue
		}
		why := "not scheduled yet"
		if p.Spec.NodeName != "" {
			why = "bound to " + p.Spec.NodeName + " after the drill stopped waiting"
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				why = fmt.Sprintf("%s: %s", c.Reason, c.Message)
			}
		}
		out = append(out, n+": "+why)
	}
	return out
}

func (it Iteration) failures(maxRTO time.Duration) []string {
	var f []string
	switch {
	case it.TakeoverMs == nil:
		f = append(f, "no other identity took the Lease")
	case *it.TakeoverMs > ms(maxRTO):
		f = append(f, fmt.Sprintf("takeover %s over --max-rto %s", fmtMs(it.TakeoverMs), maxRTO))
	}
	if it.PodsBound < it.PodsCreated {
		msg := fmt.Sprintf("%d of %d pods never bound", it.PodsCreated-it.PodsBound, it.PodsCreated)
		if len(it.Unbound) > 0 {
			msg += " (" + strings.Join(it.Unbound, "; ") + ")"
		}
		f = append(f, msg)
	}
	for _, ov := range it.Overlaps {
		f = append(f, "two leaders bound pods at once: "+ov)
	}
	return append(f, slotFailures(it.Slots)...)
}

// replicaState is the killed replica's restart count (static pod) or its UID (a pod to be replaced).
type replicaState struct {
	ns, name, uid string
	restarts      int32
	selector      labels.Selector
	ready         int
}

func (o *Options) replicaState(ctx context.Context, victim string) (replicaState, error) {
	var st replicaState
	var p *corev1.Pod
	if o.Cluster != nil {
		node := victim[strings.LastIndex(victim, " ")+1:]
		pods, err := o.API.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return st, err
		}
		for i := range pods.Items {
			if pods.Items[i].Name == ContainerName(o.Target)+"-"+node {
				p = &pods.Items[i]
			}
		}
		if p == nil {
			return st, fmt.Errorf("no pod %s-%s", ContainerName(o.Target), node)
		}
	} else {
		ns, name, _ := strings.Cut(strings.TrimPrefix(victim, "pod "), "/")
		var err error
		if p, err = o.API.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return st, err
		}
	}
	st.ns, st.name, st.uid = p.Namespace, p.Name, string(p.UID)
	for _, c := range p.Status.ContainerStatuses {
		st.restarts += c.RestartCount
	}
	st.selector = replicaSelector(ctx, o.API, p)
	n, err := o.readyCount(ctx, st)
	st.ready = n
	return st, err
}

func (o *Options) readyCount(ctx context.Context, st replicaState) (int, error) {
	pods, err := o.API.CoreV1().Pods(st.ns).List(ctx, metav1.ListOptions{LabelSelector: st.selector.String()})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// unready describes the replicas of st that are not Ready: each pod's node, phase, waiting
// reason and newest Warning event (what ContainerCreating or a crash loop waits on), for progress
// and errors.
func (o *Options) unready(ctx context.Context, st replicaState) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := o.API.CoreV1().Pods(st.ns).List(ctx, metav1.ListOptions{LabelSelector: st.selector.String()})
	if err != nil {
		return "cannot list the pods: " + err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}
		if ready || p.DeletionTimestamp != nil {
			continue
		}
		d := fmt.Sprintf("pod %s on %s: %s", p.Name, dash(p.Spec.NodeName), p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Waiting != nil {
				d += ", " + c.Name + " " + c.State.Waiting.Reason
			}
		}
		if w := kubeapi.PodWarning(ctx, o.API, st.ns, p.Name); w != "" {
			d += " (event " + w + ")"
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return "no unready pod of " + st.selector.String() + " (not created yet?)"
	}
	return strings.Join(out, "; ")
}

// fault takes the victim down: over SSH a signal to its container's process; through the API a
// pod deletion.
func (o *Options) fault(ctx context.Context, victim string) error {
	if o.Cluster == nil {
		ns, name, _ := strings.Cut(strings.TrimPrefix(victim, "pod "), "/")
		opts := metav1.DeleteOptions{}
		if o.Method == MethodProcess {
			zero := int64(0)
			opts.GracePeriodSeconds = &zero
		}
		return o.API.CoreV1().Pods(ns).Delete(ctx, name, opts)
	}
	host := victim[strings.LastIndex(victim, " ")+1:]
	var h v1alpha1.Host
	for _, x := range o.Cluster.ControlPlaneHosts() {
		if x.Name == host {
			h = x
		}
	}
	cli, err := o.Dialer.Dial(ctx, provision.TargetOf(h))
	if err != nil {
		return err
	}
	defer cli.Close()
	sig := "KILL"
	if o.Method == MethodGraceful {
		sig = "TERM"
	}
	_, err = cli.Run(ctx, "drill/fault", SignalContainerScript("", ContainerName(o.Target), sig))
	return err
}

// SignalContainerScript is a sh script that sends signal sig ("KILL", "TERM") to the running task
// of the container kubelet named container (in pod, when pod is not ""), found by the labels
// containerd's CRI plugin puts on it (io.kubernetes.container.name, io.kubernetes.pod.name)
// through ctr: hosts have containerd's client, not always crictl. The script exits 91 when no such
// container runs. The names are quoted for the shell.
func SignalContainerScript(pod, container, sig string) string {
	filter := `labels."io.kubernetes.container.name"==` + container
	what := "container " + container
	if pod != "" {
		filter += `,labels."io.kubernetes.pod.name"==` + pod
		what += " in pod " + pod
	}
	return fmt.Sprintf(`set -e
ids=$(ctr -n k8s.io containers ls -q %[1]s)
pid=$(ctr -n k8s.io tasks ls | awk -v ids=" $(echo $ids) " '$3 == "RUNNING" && index(ids, " " $1 " ") { print $2; exit }')
[ -n "$pid" ] || { echo %[2]s >&2; exit 91; }
kill -%[3]s "$pid"`, shell.Quote(filter), shell.Quote("no running "+what), sig)
}

// waitBack waits until the replicas are as many Ready as before and the victim was restarted
// (static pod) or replaced (a pod).
func (o *Options) waitBack(ctx context.Context, victim string, before replicaState) error {
	// A container killed again and again is restarted after kubelet's crash back-off, which doubles
	// up to 5 minutes (and resets after 10 minutes of running): allow for the longest one.
	timeout := max(o.Timeout, kubeletMaxBackoff+time.Minute)
	start, said := time.Now(), time.Now()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := o.readyCount(ctx, before)
		if err != nil || n < before.ready {
			if time.Since(said) >= time.Minute {
				said = time.Now()
				o.Printer.Infof("put back: %d of %d replica(s) Ready after %s; waiting on %s", n, before.ready, time.Since(start).Round(time.Second), o.unready(ctx, before))
			}
			return false, nil
		}
		if o.Cluster == nil {
			_, err := o.API.CoreV1().Pods(before.ns).Get(ctx, before.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}
		p, err := o.API.CoreV1().Pods(before.ns).Get(ctx, before.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		var r int32
		for _, c := range p.Status.ContainerStatuses {
			r += c.RestartCount
		}
		return r > before.restarts, nil
	})
	if err != nil {
		return fmt.Errorf("put back: %s not Ready again within %s (%s): %w", victim, timeout, o.unready(context.WithoutCancel(ctx), before), err)
	}
	return nil
}

func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func msp(d time.Duration) *float64 { v := ms(d); return &v }

func fmtMs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0fms", *v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
