// Package workflow runs a GitHub Actions workflow's `run:` steps on this machine as a Linux runner
// would, so an example workflow users copy (examples/github-actions.yaml) is executed by the e2e
// instead of trusted: the shell GitHub picks (`bash -e` when none is given; `shell: bash`, from the
// step or `defaults.run`, is `bash --noprofile --norc -eo pipefail`), the workflow's, job's and
// step's env in GitHub's order of precedence with the runner's own variables (GITHUB_*, RUNNER_*)
// last, GITHUB_ENV and GITHUB_PATH carried to later steps, `if:` of success()/failure()/always(),
// `continue-on-error`, and a step's `timeout-minutes` (its whole process group killed).
//
// What a runner does that this package does not: `uses:` steps are not run (the caller reads their
// `with:`); the job's `timeout-minutes` is not enforced (a test has its own); `${{ }}` expressions
// are allowed only as whole env values and are resolved by the caller (secrets and repository
// variables); a `run:` script holding one is refused at Load, so every value a script reads comes
// through its environment, where a test can set it.
//
// Reference: https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax
// and .../workflow-commands (GITHUB_ENV, GITHUB_PATH).
package workflow

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// Workflow is the part of a workflow file this package reads. Keys it does not know make Load fail,
// so a workflow cannot hold what the e2e silently ignores.
type Workflow struct {
	Name        string          `yaml:"name"`
	On          any             `yaml:"on"`
	Permissions any             `yaml:"permissions,omitempty"`
	Concurrency any             `yaml:"concurrency,omitempty"`
	Defaults    *Defaults       `yaml:"defaults,omitempty"`
	Env         Env             `yaml:"env,omitempty"`
	Jobs        map[string]*Job `yaml:"jobs"`
}

// Defaults is a workflow's or job's `defaults:`.
type Defaults struct {
	Run struct {
		Shell            string `yaml:"shell,omitempty"`
		WorkingDirectory string `yaml:"working-directory,omitempty"`
	} `yaml:"run"`
}

// Job is one job of a workflow.
type Job struct {
	Name           string    `yaml:"name,omitempty"`
	RunsOn         any       `yaml:"runs-on"`
	TimeoutMinutes int       `yaml:"timeout-minutes,omitempty"`
	Permissions    any       `yaml:"permissions,omitempty"`
	Defaults       *Defaults `yaml:"defaults,omitempty"`
	Env            Env       `yaml:"env,omitempty"`
	Steps          []Step    `yaml:"steps"`
}

// Step is one step: a `uses:` action or a `run:` script.
type Step struct {
	ID               string         `yaml:"id,omitempty"`
	Name             string         `yaml:"name,omitempty"`
	If               string         `yaml:"if,omitempty"`
	Uses             string         `yaml:"uses,omitempty"`
	With             map[string]any `yaml:"with,omitempty"`
	Run              string         `yaml:"run,omitempty"`
	Shell            string         `yaml:"shell,omitempty"`
	WorkingDirectory string         `yaml:"working-directory,omitempty"`
	Env              Env            `yaml:"env,omitempty"`
	ContinueOnError  bool           `yaml:"continue-on-error,omitempty"`
	TimeoutMinutes   int            `yaml:"timeout-minutes,omitempty"`
}

// Title is the step's name, else its id, else its action or the first line of its script.
func (s Step) Title() string {
	switch {
	case s.Name != "":
		return s.Name
	case s.ID != "":
		return s.ID
	case s.Uses != "":
		return s.Uses
	}
	first, _, _ := strings.Cut(strings.TrimSpace(s.Run), "\n")
	return first
}

// Env is an env: mapping; numbers and booleans are kept as their text.
type Env map[string]string

// UnmarshalYAML accepts string, number and boolean values (`RETRIES: 3`), as their text.
func (e *Env) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: env is not a mapping", n.Line)
	}
	*e = Env{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: env %s: not a string, number or boolean", v.Line, k.Value)
		}
		(*e)[k.Value] = v.Value
	}
	return nil
}

// expression is one ${{ … }}.
var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// Load reads and checks a workflow file. Errors: the file's; YAML; a key this package does not
// model (with its path); a job without steps; a step with both or neither of run and uses; a run
// script holding a ${{ }} expression, or an env value holding one as part of a longer text; an
// `if:` other than success(), failure() or always() on a run step.
func Load(path string) (*Workflow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var w Workflow
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	envs := func(where string, e Env) {
		for k, v := range e {
			if m := expression.FindStringIndex(v); m != nil && (m[0] != 0 || m[1] != len(v)) {
				errs = append(errs, fmt.Errorf("%s.env.%s: %q: an expression must be the whole value (resolved by the caller)", where, k, v))
			}
		}
	}
	envs("env", w.Env)
	if len(w.Jobs) == 0 {
		errs = append(errs, errors.New("jobs: none"))
	}
	for id, j := range w.Jobs {
		where := "jobs." + id
		envs(where, j.Env)
		if len(j.Steps) == 0 {
			errs = append(errs, fmt.Errorf("%s.steps: none", where))
		}
		for i, s := range j.Steps {
			at := fmt.Sprintf("%s.steps[%d] (%s)", where, i, s.Title())
			envs(at, s.Env)
			switch {
			case (s.Run == "") == (s.Uses == ""):
				errs = append(errs, fmt.Errorf("%s: give one of run and uses", at))
			case s.Run != "" && expression.MatchString(s.Run):
				errs = append(errs, fmt.Errorf("%s.run: holds %q: read the value from env instead, so the script runs unchanged elsewhere", at, expression.FindString(s.Run)))
			case s.Run != "" && !slices.Contains([]string{"", "bash"}, w.shell(j, s)):
				errs = append(errs, fmt.Errorf("%s.shell: %q: only bash is run here", at, w.shell(j, s)))
			}
			if s.Run != "" {
				if _, err := condition(s.If); err != nil {
					errs = append(errs, fmt.Errorf("%s.if: %w", at, err))
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &w, nil
}

// shell is the step's shell: its own, else the job's defaults.run, else the workflow's ("": none
// given, which GitHub runs as `bash -e`).
func (w *Workflow) shell(j *Job, s Step) string {
	switch {
	case s.Shell != "":
		return s.Shell
	case j.Defaults != nil && j.Defaults.Run.Shell != "":
		return j.Defaults.Run.Shell
	case w.Defaults != nil && w.Defaults.Run.Shell != "":
		return w.Defaults.Run.Shell
	}
	return ""
}

// Job returns the job id, or an error listing the workflow's jobs.
func (w *Workflow) Job(id string) (*Job, error) {
	if j, ok := w.Jobs[id]; ok {
		return j, nil
	}
	var ids []string
	for k := range w.Jobs {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	return nil, fmt.Errorf("no job %q (jobs: %s)", id, strings.Join(ids, ", "))
}

// Step returns the job's step whose id is id, with its index.
func (j *Job) Step(id string) (int, Step, error) {
	for i, s := range j.Steps {
		if s.ID == id {
			return i, s, nil
		}
	}
	return -1, Step{}, fmt.Errorf("no step with id %q", id)
}

// when is a step's `if:` as this package evaluates it.
type when int

const (
	onSuccess when = iota // "" or success(): no earlier step failed
	onFailure             // failure(): an earlier step failed
	onAlways              // always()
)

func condition(s string) (when, error) {
	s = strings.TrimSpace(s)
	if m := expression.FindStringSubmatch(s); m != nil && m[0] == s {
		s = m[1]
	}
	switch s {
	case "", "success()":
		return onSuccess, nil
	case "failure()":
		return onFailure, nil
	case "always()":
		return onAlways, nil
	}
	return 0, fmt.Errorf("%q: only success(), failure() and always() are evaluated here", s)
}

// Runner runs a job's run steps; its state (GITHUB_ENV and GITHUB_PATH additions, whether a step
// failed) carries from one Run call to the next, so a test may run a job in parts and check the
// cluster in between.
type Runner struct {
	// Workflow is the workflow whose env applies; Job the job whose steps are run.
	Workflow *Workflow
	Job      *Job
	// Workspace is GITHUB_WORKSPACE and every step's working directory; Temp is RUNNER_TEMP.
	Workspace, Temp string
	// Base is the environment the steps start from (e.g. os.Environ()).
	Base []string
	// Set overrides every env of the workflow, the job, GITHUB_ENV and the step: what a test
	// substitutes for this machine (the lab's node image, its kubeconfig, a proxy).
	Set map[string]string
	// Resolve gives the value of a ${{ expr }} env value (expr without the braces, e.g.
	// "secrets.SSH_KEY", "vars.HACTL_SPEC"); nil resolves every expression to "".
	Resolve func(expr string) (string, error)
	// Output receives every step's combined output as it runs (e.g. a test log writer).
	Output io.Writer

	failed  bool
	env     []string // GITHUB_ENV additions, in order
	path    []string // GITHUB_PATH additions, newest first
	started bool
}

// Result is one step's outcome.
type Result struct {
	Step Step
	// Ran is false for a uses step and for a step its if: skipped.
	Ran bool
	// Code is the script's exit code (-1 when it could not start or ran out of time).
	Code     int
	Output   string
	Duration time.Duration
	Err      error
}

// Failed reports whether an earlier step failed (without continue-on-error).
func (r *Runner) Failed() bool { return r.failed }

// Run runs steps (a slice of r.Job.Steps) in order and returns each one's Result. A failing step
// fails the job (later steps run only with if: failure() or always()); Run itself returns an error
// only when the runner could not work (files, expressions), not for a step that failed.
func (r *Runner) Run(ctx context.Context, steps []Step) ([]Result, error) {
	if !r.started {
		for _, f := range []string{"env", "path", "output", "summary"} {
			if err := os.WriteFile(r.file(f), nil, 0o644); err != nil {
				return nil, err
			}
		}
		r.started = true
	}
	var out []Result
	for _, s := range steps {
		res := Result{Step: s}
		c, _ := condition(s.If)
		run := s.Run != "" && (c == onAlways || (c == onSuccess) == !r.failed)
		if !run {
			out = append(out, res)
			continue
		}
		env, err := r.environ(s)
		if err != nil {
			return out, fmt.Errorf("step %q: %w", s.Title(), err)
		}
		res.Ran = true
		start := time.Now()
		res.Output, res.Code, res.Err = r.exec(ctx, s, env)
		res.Duration = time.Since(start)
		if res.Code != 0 && !s.ContinueOnError {
			r.failed = true
		}
		if err := r.collect(); err != nil {
			return out, fmt.Errorf("step %q: %w", s.Title(), err)
		}
		out = append(out, res)
	}
	return out, nil
}

// Try runs one run step now, whatever its if: and the job's state, with set on top of Set: what
// the step does with other values (a budget it must miss). The job's state is left as it was: the
// step's GITHUB_ENV and GITHUB_PATH additions are dropped, and its failure fails nothing.
func (r *Runner) Try(ctx context.Context, s Step, set map[string]string) (Result, error) {
	if s.Run == "" {
		return Result{Step: s}, fmt.Errorf("step %q has no run script", s.Title())
	}
	saved := r.Set
	r.Set = maps.Clone(saved)
	if r.Set == nil {
		r.Set = map[string]string{}
	}
	maps.Copy(r.Set, set)
	env, err := r.environ(s)
	r.Set = saved
	if err != nil {
		return Result{Step: s}, fmt.Errorf("step %q: %w", s.Title(), err)
	}
	res := Result{Step: s, Ran: true}
	start := time.Now()
	res.Output, res.Code, res.Err = r.exec(ctx, s, env)
	res.Duration = time.Since(start)
	for _, f := range []string{"env", "path"} {
		if err := os.WriteFile(r.file(f), nil, 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (r *Runner) file(name string) string { return filepath.Join(r.Temp, "_runner_file_"+name) }

// environ is the step's environment: Base, the workflow's and job's env, GITHUB_ENV's additions,
// the step's env, Set, then the runner's variables; PATH with GITHUB_PATH's additions first.
func (r *Runner) environ(s Step) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(kv string) {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range r.Base {
		set(kv)
	}
	for _, e := range []Env{r.Workflow.Env, r.Job.Env} {
		if err := r.apply(e, set); err != nil {
			return nil, err
		}
	}
	for _, kv := range r.env {
		set(kv)
	}
	if err := r.apply(s.Env, set); err != nil {
		return nil, err
	}
	for k, v := range r.Set {
		set(k + "=" + v)
	}
	// The runner's own variables cannot be overwritten (GitHub: "default environment variables").
	for _, kv := range []string{"CI=true", "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE=" + r.Workspace, "RUNNER_TEMP=" + r.Temp,
		"GITHUB_ENV=" + r.file("env"), "GITHUB_PATH=" + r.file("path"), "GITHUB_OUTPUT=" + r.file("output"),
		"GITHUB_STEP_SUMMARY=" + r.file("summary"), "RUNNER_OS=Linux"} {
		set(kv)
	}
	if len(r.path) > 0 {
		set("PATH=" + strings.Join(append(slices.Clone(r.path), vars["PATH"]), string(os.PathListSeparator)))
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// apply sets e's entries in key order, resolving whole-value expressions.
func (r *Runner) apply(e Env, set func(string)) error {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := e[k]
		if m := expression.FindStringSubmatch(v); m != nil {
			if r.Resolve == nil {
				v = ""
			} else {
				var err error
				if v, err = r.Resolve(m[1]); err != nil {
					return fmt.Errorf("env %s: ${{ %s }}: %w", k, m[1], err)
				}
			}
		}
		set(k + "=" + v)
	}
	return nil
}

// exec runs the step's script as GitHub runs it on Linux: `bash -e FILE` without a shell, `bash
// --noprofile --norc -eo pipefail FILE` with shell bash; in its own process group, all of which is
// killed when the step's timeout-minutes runs out.
func (r *Runner) exec(ctx context.Context, s Step, env []string) (string, int, error) {
	if s.TimeoutMinutes > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(s.TimeoutMinutes)*time.Minute)
		defer cancel()
	}
	script, err := os.CreateTemp(r.Temp, "step-*.sh")
	if err != nil {
		return "", -1, err
	}
	defer os.Remove(script.Name())
	if _, err := script.WriteString(s.Run); err != nil {
		script.Close()
		return "", -1, err
	}
	if err := script.Close(); err != nil {
		return "", -1, err
	}
	dir := r.Workspace
	wd := s.WorkingDirectory
	for _, d := range []*Defaults{r.Job.Defaults, r.Workflow.Defaults} {
		if wd == "" && d != nil {
			wd = d.Run.WorkingDirectory
		}
	}
	if wd != "" {
		dir = filepath.Join(r.Workspace, wd)
	}
	args := []string{"-e", script.Name()}
	if r.Workflow.shell(r.Job, s) == "bash" {
		args = []string{"--noprofile", "--norc", "-eo", "pipefail", script.Name()}
	}
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var buf bytes.Buffer
	var w io.Writer = &buf
	if r.Output != nil {
		w = io.MultiWriter(&buf, r.Output)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return buf.String(), 0, nil
	case errors.As(err, &exit) && ctx.Err() == nil:
		return buf.String(), exit.ExitCode(), err
	default:
		return buf.String(), -1, err
	}
}

// collect reads what the step appended to GITHUB_ENV (NAME=value lines, or NAME<<DELIM heredocs)
// and GITHUB_PATH (a directory a line), then empties both files for the next step.
func (r *Runner) collect() error {
	b, err := os.ReadFile(r.file("env"))
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), len(b)+1) // a value may be as long as the file
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if name, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			closed := false
			for sc.Scan() {
				if sc.Text() == delim {
					closed = true
					break
				}
				val = append(val, sc.Text())
			}
			if !closed {
				return fmt.Errorf("GITHUB_ENV: %s<<%s is not closed", name, delim)
			}
			r.env = append(r.env, name+"="+strings.Join(val, "\n"))
			continue
		}
		if !strings.Contains(line, "=") {
			return fmt.Errorf("GITHUB_ENV: %q is neither NAME=value nor NAME<<DELIMITER", line)
		}
		r.env = append(r.env, line)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("GITHUB_ENV: %w", err)
	}
	p, err := os.ReadFile(r.file("path"))
	if err != nil {
		return err
	}
	for _, dir := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if dir = strings.TrimSpace(dir); dir != "" {
			r.path = append([]string{dir}, r.path...)
		}
	}
	for _, f := range []string{"env", "path"} {
		if err := os.WriteFile(r.file(f), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}
