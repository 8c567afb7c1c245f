package kit

import (
	"context"
	"path/filepath"

	"github.com/hactl/hactl/e2e/lab"
)

// Lab is the e2e lab one benchmark runs in, brought up by UpLab: the lab itself (hosts, Exec,
// ObjectStore, Kubeconfig, Dir — <Root>/<dir> of UpLab, where the specs, the key pair and hactl's
// state dirs live — and SpecPath(n), the spec of an n-member cluster) and the repository root.
// Teardown takes it down unless the benchmark keeps it.
type Lab struct {
	*lab.Lab
	// Root is the repository root.
	Root string
	keep bool
}

// UpLab brings up the lab o describes in <repository root>/dir (".lab-bench", ".lab-bench-etcd":
// each benchmark its own directory). o.RepoRoot is the repository root (empty: found from the
// working directory, lab.FindRepoRoot); o.Dir is set here; o.Logf defaults to Logf (progress on
// stderr). keep (the benchmarks' -keep) makes Teardown leave the lab running. Errors:
// FindRepoRoot's, lab.Up's.
func UpLab(ctx context.Context, dir string, keep bool, o lab.Options) (*Lab, error) {
	if o.RepoRoot == "" {
		root, err := lab.FindRepoRoot(".")
		if err != nil {
			return nil, err
		}
		o.RepoRoot = root
	}
	o.Dir = filepath.Join(o.RepoRoot, dir)
	if o.Logf == nil {
		o.Logf = Logf
	}
	l, err := lab.Up(ctx, o)
	if err != nil {
		return nil, err
	}
	return &Lab{Lab: l, Root: o.RepoRoot, keep: keep}, nil
}

// Teardown takes the lab down (lab.Lab.Down, also after ctx was cancelled) unless it is kept; a
// failure is logged ("lab down: ..." on stderr), not returned: the figures are printed by then.
func (l *Lab) Teardown(ctx context.Context) {
	if l.keep {
		return
	}
	if err := l.Down(context.WithoutCancel(ctx)); err != nil {
		Logf("lab down: %v", err)
	}
}

// ObjectStoreEnv returns the lab's object store (lab.Options.ObjectStore) with its backup access
// key exported into this process's environment (ObjectStore.Setenv), where the hactl under test
// reads it. Errors: the lab has none; Setenv's.
func (l *Lab) ObjectStoreEnv() (lab.ObjectStore, error) {
	o, err := l.ObjectStore()
	if err != nil {
		return o, err
	}
	return o, o.Setenv()
}
