package workflow

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/e2e/lab"
)

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const runnerWorkflow = `
name: t
on: push
env:
  LEVEL: workflow
  N: 3
  OVERRIDDEN: workflow
jobs:
  j:
    runs-on: ubuntu-24.04
    env:
      LEVEL: job
      SECRET: ${{ secrets.TOKEN }}
    steps:
      - uses: actions/checkout@v4
      - id: first
        run: |
          echo "level=$LEVEL n=$N secret=$SECRET over=$OVERRIDDEN"
          echo "FROM_ENV=one" >> "$GITHUB_ENV"
          { echo "MULTI<<EOF"; echo "a"; echo "b"; echo "EOF"; } >> "$GITHUB_ENV"
          mkdir -p "$RUNNER_TEMP/tools" && printf '#!/bin/sh\necho tool-ran\n' > "$RUNNER_TEMP/tools/mytool" && chmod +x "$RUNNER_TEMP/tools/mytool"
          echo "$RUNNER_TEMP/tools" >> "$GITHUB_PATH"
          pwd
      - id: second
        env:
          LEVEL: step
        run: |
          echo "level=$LEVEL from=$FROM_ENV multi=$(echo "$MULTI" | tr '\n' ,)"
          mytool
      - id: nopipefail
        env:
          RUNNER_TEMP: /not/the/runner/temp
        run: |
          false | true
          [ "$RUNNER_TEMP" != /not/the/runner/temp ]
          head -c 100000 /dev/zero | tr '\0' x | sed 's/^/LONG=/' >> "$GITHUB_ENV"; echo >> "$GITHUB_ENV"
      - id: pipefail
        shell: bash
        continue-on-error: true
        run: false | true
      - id: fails
        run: exit 7
      - id: skipped
        run: echo must-not-run
      - id: onfailure
        if: failure()
        run: echo failure-ran
      - id: always
        if: ${{ always() }}
        run: echo always-ran
`

// TestRunner runs a workflow through the runner: env precedence (workflow < job < GITHUB_ENV <
// step < Set), expressions resolved by the caller, GITHUB_ENV (one line and heredoc) and GITHUB_PATH
// carried to later steps, bash's -eo pipefail, continue-on-error, and what runs after a failure.
func TestRunner(t *testing.T) {
	w, err := Load(write(t, runnerWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	j, err := w.Job("j")
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	r := &Runner{Workflow: w, Job: j, Workspace: ws, Temp: t.TempDir(), Base: os.Environ(),
		Set: map[string]string{"OVERRIDDEN": "set"},
		Resolve: func(expr string) (string, error) {
			if expr != "secrets.TOKEN" {
				t.Errorf("resolve %q", expr)
			}
			return "s3cr3t", nil
		}}
	res, err := r.Run(context.Background(), j.Steps[:3])
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Ran {
		t.Error("a uses step ran")
	}
	if want := "level=job n=3 secret=s3cr3t over=set\n"; !strings.HasPrefix(res[1].Output, want) || !strings.Contains(res[1].Output, ws) {
		t.Errorf("first step: %q, want %q and the workspace %s", res[1].Output, want, ws)
	}
	if want := "level=step from=one multi=a,b,\ntool-ran\n"; res[2].Output != want || res[2].Code != 0 {
		t.Errorf("second step: %q (exit %d), want %q", res[2].Output, res[2].Code, want)
	}
	if r.Failed() {
		t.Fatal("failed after the first steps")
	}
	res, err = r.Run(context.Background(), j.Steps[3:])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, x := range res {
		got[x.Step.ID] = x
	}
	if x := got["nopipefail"]; !x.Ran || x.Code != 0 {
		t.Errorf("no shell (bash -e, no pipefail; the runner's RUNNER_TEMP kept): ran %v, exit %d, want 0\n%s", x.Ran, x.Code, x.Output)
	}
	if x := got["pipefail"]; !x.Ran || x.Code != 1 {
		t.Errorf("false | true with shell: bash (pipefail): ran %v, exit %d, want 1", x.Ran, x.Code)
	}
	if long := envValue(r, "LONG"); len(long) != 100000 {
		t.Errorf("a 100 kB GITHUB_ENV value came through as %d bytes", len(long))
	}
	if x := got["fails"]; x.Code != 7 || x.Err == nil {
		t.Errorf("exit 7: code %d, err %v", x.Code, x.Err)
	}
	if got["skipped"].Ran {
		t.Error("a step after a failure ran without if: always()")
	}
	if x := got["onfailure"]; !x.Ran || x.Output != "failure-ran\n" {
		t.Errorf("if: failure(): %+v", x)
	}
	if x := got["always"]; !x.Ran || x.Output != "always-ran\n" {
		t.Errorf("if: always(): %+v", x)
	}
	if !r.Failed() {
		t.Error("the job did not fail")
	}

	// Try: one step with other values, the job's state untouched.
	fresh := &Runner{Workflow: w, Job: j, Workspace: ws, Temp: t.TempDir(), Base: os.Environ()}
	if _, err := fresh.Run(context.Background(), j.Steps[:2]); err != nil {
		t.Fatal(err)
	}
	x, err := fresh.Try(context.Background(), j.Steps[5], nil)
	if err != nil || x.Code != 7 || fresh.Failed() {
		t.Errorf("Try exit 7: %+v, %v; the job failed: %v", x, err, fresh.Failed())
	}
	x, err = fresh.Try(context.Background(), j.Steps[2], map[string]string{"LEVEL": "tried", "FROM_ENV": "set"})
	if err != nil || !strings.HasPrefix(x.Output, "level=tried from=set") {
		t.Errorf("Try with set: %q, %v", x.Output, err)
	}
	if res, _ := fresh.Run(context.Background(), j.Steps[2:3]); res[0].Output != "level=step from=one multi=a,b,\ntool-ran\n" {
		t.Errorf("after Try the job's env changed: %q", res[0].Output)
	}
}

// TestLoadRefuses: what the runner would run differently from GitHub is refused at Load, naming
// the step.
func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct{ name, steps, want string }{
		{"expression in run", "      - run: echo ${{ env.X }}\n", "read the value from env"},
		{"unknown key", "      - run: echo\n        with-typo: 1\n", "with-typo"},
		{"run and uses", "      - run: echo\n        uses: a/b@v1\n", "give one of run and uses"},
		{"neither", "      - name: empty\n", "give one of run and uses"},
		{"if", "      - run: echo\n        if: github.event_name == 'push'\n", "only success(), failure() and always()"},
		{"embedded expression", "      - run: echo\n        env: {A: 'x-${{ secrets.B }}'}\n", "must be the whole value"},
		{"shell", "      - run: echo\n        shell: pwsh\n", "only bash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, "on: push\njobs:\n  j:\n    runs-on: x\n    steps:\n"+tc.steps))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestExample checks the shape of examples/github-actions.yaml that e2e/kind relies on and users
// read: the steps e2e/kind runs by id, the pinned kind version, the module path and make targets
// it installs and builds from, the drill's --max-rto and exit-3 handling, and the artifact upload
// of the reports directory, also after a failure.
func TestExample(t *testing.T) {
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	w, err := Load(filepath.Join(root, "examples", "github-actions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := w.Job("drills")
	if err != nil {
		t.Fatal(err)
	}
	step := func(id string) Step {
		t.Helper()
		_, s, err := j.Step(id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if v := w.Env["KIND_VERSION"]; v != lab.KindVersion {
		t.Errorf("KIND_VERSION %s, the lab's kind is %s", v, lab.KindVersion)
	}
	if s := step("install").Run; !strings.Contains(s, `go install "sigs.k8s.io/kind@$KIND_VERSION"`) || !strings.Contains(s, `go install "`+lab.ModulePath+`/cmd/hactl@$HACTL_REF"`) {
		t.Errorf("install step:\n%s", s)
	}
	scripts := regexp.MustCompile(`bash (hack/\S+\.sh)`).FindAllStringSubmatch(step("images").Run, -1)
	if len(scripts) < 3 {
		t.Errorf("the images step runs %d of hactl's build scripts, want etcd, scheduler and operator:\n%s", len(scripts), step("images").Run)
	}
	for _, m := range scripts {
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			t.Errorf("the images step runs %s: %v", m[1], err)
		}
	}
	if w.shell(j, step("drills")) != "bash" {
		t.Error("the run steps do not get shell: bash (pipefail) from defaults.run.shell")
	}
	for _, id := range []string{"cluster", "scheduler", "operator"} {
		step(id)
	}
	if d := step("drills").Run; !strings.Contains(d, `--max-rto "$MAX_RTO"`) || !strings.Contains(d, "3) echo \"::error") || !strings.Contains(d, `exit "$verdict"`) {
		t.Errorf("drills step lacks --max-rto or its exit-3 handling:\n%s", d)
	}
	if c, _ := condition(step("cleanup").If); c != onAlways {
		t.Errorf("cleanup runs only on success: if %q", step("cleanup").If)
	}
	var upload *Step
	for i, s := range j.Steps {
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			upload = &j.Steps[i]
		}
	}
	if upload == nil {
		t.Fatal("no actions/upload-artifact step")
	}
	if c, _ := condition(upload.If); c != onAlways {
		t.Errorf("the reports are uploaded only on success: if %q", upload.If)
	}
	if p, _ := upload.With["path"].(string); strings.TrimSuffix(p, "/") != w.Env["REPORTS"] {
		t.Errorf("upload path %q, reports are written to $REPORTS=%q", p, w.Env["REPORTS"])
	}
}

// envValue is the last GITHUB_ENV value of name the runner holds.
func envValue(r *Runner, name string) string {
	v := ""
	for _, kv := range r.env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v = val
		}
	}
	return v
}

// TestCancelKillsTheStepsProcesses: a cancelled step (its timeout, or the test's) is killed with
// every process it started, and Run returns at once instead of waiting for them.
func TestCancelKillsTheStepsProcesses(t *testing.T) {
	w, err := Load(write(t, "on: push\njobs:\n  j:\n    runs-on: x\n    steps:\n      - run: sleep 60 & sleep 60; wait\n"))
	if err != nil {
		t.Fatal(err)
	}
	j, _ := w.Job("j")
	r := &Runner{Workflow: w, Job: j, Workspace: t.TempDir(), Temp: t.TempDir(), Base: os.Environ()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	res, err := r.Run(ctx, j.Steps)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 4*time.Second || res[0].Code != -1 {
		t.Errorf("cancelled after 1 s: returned after %s with exit %d", took, res[0].Code)
	}
}
