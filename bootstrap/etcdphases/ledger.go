package etcdphases

import (
	"sync"

	"github.com/hactl/hactl/report"
)

// ledger is what the phases learn and decide per member, by member name: the facts preflight
// gathered and the plan's HostPlans. Preflight fills the facts from every member at once (mu); the
// phases after it read and change both in turn.
type ledger struct {
	mu    sync.Mutex
	facts map[string]*Facts
	plans map[string]*HostPlan
}

// factsOf returns what preflight found on member name (nil before preflight).
func (l *ledger) factsOf(name string) *Facts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.facts[name]
}

// setFacts records what preflight found on member name.
func (l *ledger) setFacts(name string, f *Facts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.facts[name] = f
}

// setPlan replaces member name's plan.
func (l *ledger) setPlan(name string, p *HostPlan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plans[name] = p
}

// anyChanges reports whether any member's plan is not ActionUnchanged.
func (l *ledger) anyChanges() bool {
	for _, p := range l.plans {
		if p.Action != report.ActionUnchanged {
			return true
		}
	}
	return false
}

// noneRunning reports whether the facts of every member of ms say etcd.service is not running nor
// starting (inactive or failed): then no member's client URL can answer.
func (l *ledger) noneRunning(ms []Member) bool {
	for _, m := range ms {
		f := l.facts[m.Name]
		if f == nil || (f.EtcdActive != "inactive" && f.EtcdActive != "failed") {
			return false
		}
	}
	return true
}
