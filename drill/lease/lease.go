// Package lease is `hactl drill kill-leader --target lease/NAMESPACE/NAME`: the holder of a
// coordination.k8s.io Lease (hactl-scheduler's, kube-scheduler's, kube-controller-manager's — any
// client-go leader election) is taken down exactly, while a workload creates pods for the scheduler
// at a fixed rate, and the takeover is measured on the drill's own clock from watch events (never
// the Lease's renewTime, which is the holders' clocks): time until another identity holds the Lease,
// until the first pod is bound after the fault, the longest gap between bindings, the pods pending
// at the peak. With hactl-scheduler (RecordingBinder) it proves that two replicas never acted as
// leader at once: ordered by the etcd revision of each binding, the binding windows of different
// identities never overlap. The apiserver's refusal of a second binding is no such proof.
//
// Faults: --method process SIGKILLs the holder's container on its host (over SSH; static pods of
// the cluster hactl built), --method graceful sends SIGTERM (client-go's ReleaseOnCancel hands the
// Lease over at once); through a kubeconfig the holder's pod is deleted, with no grace for process
// and with its grace period for graceful. Putting back is Kubernetes' own: kubelet restarts the
// container, the Deployment makes a new pod; the drill waits for the replica to be back and Ready.
package lease

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hactl/hactl/drill"
)

// Methods of a Lease drill.
const (
	MethodProcess  = "process"
	MethodGraceful = "graceful"
)

// Defaults.
const (
	DefaultRate    = 5
	DefaultMaxRTO  = 30 * time.Second
	DefaultTimeout = 2 * time.Minute
	Namespace      = "hactl-drill"
	// DrillLabel marks the workload's pods (value: the drill ID).
	DrillLabel = "drill.hactl.io/id"
)

// Target is a Lease, parsed from "lease/NAMESPACE/NAME".
type Target struct{ Namespace, Name string }

func (t Target) String() string { return "lease/" + t.Namespace + "/" + t.Name }

// ParseTarget parses --target; errors are *drill.InputError (exit 2) with the expected shape.
func ParseTarget(s string) (Target, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] != "lease" || parts[1] == "" || parts[2] == "" {
		return Target{}, &drill.InputError{Err: fmt.Errorf("--target %q: lease/NAMESPACE/NAME, e.g. lease/kube-system/hactl-scheduler (kube-scheduler and kube-controller-manager are Leases in kube-system too)", s)}
	}
	if errs := validation.IsDNS1123Label(parts[1]); len(errs) > 0 {
		return Target{}, &drill.InputError{Err: fmt.Errorf("--target %q: namespace %q: %s", s, parts[1], strings.Join(errs, "; "))}
	}
	if errs := validation.IsDNS1123Subdomain(parts[2]); len(errs) > 0 {
		return Target{}, &drill.InputError{Err: fmt.Errorf("--target %q: Lease name %q: %s", s, parts[2], strings.Join(errs, "; "))}
	}
	return Target{Namespace: parts[1], Name: parts[2]}, nil
}

// Report is the drill's outcome: its settings, one Iteration per --count, and the verdict.
type Report struct {
	Drill     string  `json:"drill"`
	Target    string  `json:"target"`
	Via       string  `json:"via"`
	Method    string  `json:"method"`
	Scheduler string  `json:"schedulerName,omitempty"`
	Rate      int     `json:"ratePodsPerSecond"`
	MaxRTOMs  float64 `json:"maxRTOMs"`
	// ResolutionMs bounds the timing error of every figure: events are stamped when the watch
	// delivers them, and the drill checks for the end every ResolutionMs.
	ResolutionMs float64     `json:"resolutionMs"`
	Started      time.Time   `json:"started"`
	Iter         []Iteration `json:"iterations"`
	Result       string      `json:"result"`
	Failures     []string    `json:"failures,omitempty"`
	Error        string      `json:"error,omitempty"`
}

// Iteration is one fault and what was observed, times in ms after the fault was sent.
type Iteration struct {
	OldHolder string `json:"oldHolder"`
	NewHolder string `json:"newHolder"`
	// Killed is the replica taken down: a host's container or a pod.
	Killed string `json:"killed"`
	// TakeoverMs: until a watch event showed another identity holding the Lease.
	TakeoverMs *float64 `json:"takeoverMs"`
	// FirstBindMs: until the first pod was seen bound after the fault by another replica than the
	// one that bound the last pod before it (no workload: nil).
	FirstBindMs *float64 `json:"firstBindMs,omitempty"`
	// LongestGapMs is the longest interval without a binding, from the last binding before the fault.
	LongestGapMs *float64 `json:"longestBindGapMs,omitempty"`
	PendingPeak  int      `json:"pendingPeak"`
	PodsCreated  int      `json:"podsCreated"`
	PodsBound    int      `json:"podsBound"`
	// Unbound names each pod created but never seen bound, with its PodScheduled condition's
	// reason and message as the drill ended ("NAME: REASON: MESSAGE").
	Unbound []string `json:"unbound,omitempty"`
	// Windows are the binding identities in revision order; Overlaps names any two that interleave.
	Windows  []Window `json:"bindingWindows,omitempty"`
	Overlaps []string `json:"overlaps,omitempty"`
	// Proof says whether the no-two-leaders proof could be made (RecordingBinder's annotation on
	// every bound pod) and why not.
	Proof string `json:"proof"`
	// Slots: with a SlotCheck, every slot from the fault's to the takeover's and the actions recorded
	// for it (want one each).
	Slots   []SlotActions `json:"slots,omitempty"`
	Verdict string        `json:"verdict"`
}

// Window is one identity's bindings: first and last revision and drill-clock time.
type Window struct {
	Identity string  `json:"identity"`
	Pods     int     `json:"pods"`
	FirstRev uint64  `json:"firstRevision"`
	LastRev  uint64  `json:"lastRevision"`
	FirstMs  float64 `json:"firstMs"`
	LastMs   float64 `json:"lastMs"`
}
