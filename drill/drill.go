// Package drill runs kmirror's guided disaster-recovery drill: preflight, a
// T0 snapshot, an outage of the source, the failover, moving the clients,
// verifying what was lost and duplicated, a failback rehearsal and a
// report. It runs against the demo's sandbox, which simulates the outage
// and the clients, or against real clusters, where those steps are the
// operator's and are confirmed (see Target). It is headless: the console
// shows its Status and calls Next and Confirm; kmirror demo --drill-script
// calls Run.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a drill.
type Config struct {
	// Target is what the drill acts on: SandboxTarget or RealTarget.
	Target Target
	// Engine is the instance on B that runs the forward mirror.
	Engine Mirror
	// Mirror is the forward mirror's name (a-to-b).
	Mirror string
	// Reverse is the failback mirror's name (b-to-a).
	Reverse string
	// LagThreshold is the largest total lag, in records, preflight accepts.
	LagThreshold int64
	// StepTimeout bounds every wait inside a step.
	StepTimeout time.Duration
	// ReportPath is the report's path without extension: PATH.md, PATH.json.
	ReportPath string
	Now        func() time.Time
}

func (c *Config) defaults() {
	if c.Mirror == "" {
		c.Mirror = "a-to-b"
	}
	if c.Reverse == "" {
		c.Reverse = reverseName(c.Mirror)
	}
	if c.LagThreshold <= 0 {
		c.LagThreshold = 20_000
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 90 * time.Second
	}
	if c.ReportPath == "" {
		c.ReportPath = "kmirror-drill"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// reverseName names the failback mirror: a-to-b fails back as b-to-a.
func reverseName(mirror string) string {
	if a, b, ok := strings.Cut(mirror, "-to-"); ok && a != "" && b != "" && !strings.Contains(b, "-to-") {
		return b + "-to-" + a
	}
	return mirror + "-failback"
}

// Drill is one run of the drill. Next and Run may be called from any
// goroutine, one at a time; Status never blocks on a running step.
type Drill struct {
	cfg Config

	mu      sync.Mutex
	steps   []StepRecord
	current int
	running bool
	written string
	cost    []Cost

	m      measurements // owned by the running step
	closer []func()     // guarded by mu
}

// New returns a drill at its first step.
func New(cfg Config) (*Drill, error) {
	cfg.defaults()
	if cfg.Target == nil || cfg.Engine == nil {
		return nil, errors.New("drill: a target and an engine are required")
	}
	d := &Drill{cfg: cfg}
	for _, id := range Steps {
		txt := cfg.Target.describe(id)
		d.steps = append(d.steps, StepRecord{ID: id, Step: id.String(), Title: txt.title,
			Instruction: cfg.Target.Instruction(id), Explain: txt.explain, LookAt: txt.lookAt,
			State: Pending, Result: Pending.String()})
	}
	return d, nil
}

// Close releases what the drill started (the failback instance).
func (d *Drill) Close() {
	d.mu.Lock()
	cs := d.closer
	d.closer = nil
	d.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// onClose registers what Close releases; a console that quits while a step
// runs closes the drill from another goroutine.
func (d *Drill) onClose(f func()) {
	d.mu.Lock()
	d.closer = append(d.closer, f)
	d.mu.Unlock()
}

// Status returns the drill's progress.
func (d *Drill) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := Status{Current: d.current, Running: d.running, ReportPath: d.written, Cost: slices.Clone(d.cost)}
	st.Steps = make([]StepRecord, len(d.steps))
	for i, s := range d.steps {
		s.Lines = slices.Clone(s.Lines)
		st.Steps[i] = s
	}
	return st
}

// Next runs the current step with the operator's note. A step that passes
// moves the drill on; a failed one stays current so it can run again. A
// step with an instruction runs only once it is confirmed.
func (d *Drill) Next(ctx context.Context, note string) error {
	return d.next(ctx, note, false)
}

// Confirm records that the operator did what the current step's instruction
// says, now, and runs the step. Confirming a failed step again moves its
// confirmation time.
func (d *Drill) Confirm(ctx context.Context, note string) error {
	return d.next(ctx, note, true)
}

func (d *Drill) next(ctx context.Context, note string, confirm bool) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return ErrBusy
	}
	if d.current >= len(d.steps) {
		d.mu.Unlock()
		return ErrDone
	}
	switch cur := &d.steps[d.current]; {
	case confirm && cur.Instruction == "":
		d.mu.Unlock()
		return ErrNothingToConfirm
	case confirm:
		cur.Confirmed = d.cfg.Now()
	case cur.NeedsConfirm():
		d.mu.Unlock()
		return ErrNeedsConfirm
	}
	i := d.current
	d.running = true
	rec := &d.steps[i]
	rec.State, rec.Result, rec.Started, rec.Ended, rec.Lines, rec.Error = Running, Running.String(), d.cfg.Now(), time.Time{}, nil, ""
	if note != "" {
		rec.Note = note
	}
	id := rec.ID
	d.mu.Unlock()

	err := d.run(ctx, id, &stepRun{d: d, i: i})
	// While this step still owns the measurements.
	cost := Costs(d.measured())

	d.mu.Lock()
	d.cost = cost
	rec = &d.steps[i]
	rec.Ended = d.cfg.Now()
	if err != nil {
		rec.State, rec.Result, rec.Error = Failed, Failed.String(), err.Error()
	} else {
		rec.State, rec.Result = Passed, Passed.String()
		d.current++
	}
	d.running = false
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("step %s: %w", id, err)
	}
	return nil
}

func (d *Drill) run(ctx context.Context, id StepID, r *stepRun) error {
	switch id {
	case StepPreflight:
		return d.preflight(ctx, r)
	case StepSnapshot:
		return d.snapshot(ctx, r)
	case StepOutage:
		return d.outage(ctx, r)
	case StepFailover:
		return d.failover(ctx, r)
	case StepSwitch:
		return d.cfg.Target.switchClients(ctx, r)
	case StepVerify:
		return d.cfg.Target.verify(ctx, r)
	case StepFailback:
		return d.cfg.Target.failback(ctx, r)
	case StepReport:
		return d.report(ctx, r)
	}
	return fmt.Errorf("unknown step %d", id)
}

// Run runs every step unattended and prints the step log to w. When a step
// fails the report is still written (it says which step failed) and the
// error is returned. A step that needs the operator fails with
// ErrNeedsConfirm: only the sandbox runs unattended.
func (d *Drill) Run(ctx context.Context, w io.Writer) error {
	for {
		st := d.Status()
		if st.Done() {
			return nil
		}
		id := Steps[st.Current]
		fmt.Fprintf(w, "== %d/%d %s: %s\n", st.Current+1, len(Steps), st.Steps[st.Current].Title, st.Steps[st.Current].Explain)
		err := d.Next(ctx, "")
		after := d.Status()
		for _, l := range after.Steps[st.Current].Lines {
			fmt.Fprintf(w, "   %s\n", l)
		}
		rec := after.Steps[st.Current]
		fmt.Fprintf(w, "   -> %s in %s\n", rec.Result, rec.Ended.Sub(rec.Started).Round(time.Millisecond))
		if err != nil {
			fmt.Fprintf(w, "   error: %v\n", err)
			if id != StepReport {
				if rerr := d.report(ctx, &stepRun{d: d, i: len(Steps) - 1}); rerr == nil {
					fmt.Fprintf(w, "report (incomplete drill): %s.md, %s.json\n", d.cfg.ReportPath, d.cfg.ReportPath)
				}
			}
			return err
		}
	}
}

// stepRun lets a running step publish lines as it goes, so the console
// shows a failover partition by partition rather than at the end.
type stepRun struct {
	d *Drill
	i int
}

func (r *stepRun) line(format string, args ...any) {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.d.steps[r.i].Lines = append(r.d.steps[r.i].Lines, fmt.Sprintf(format, args...))
}

// confirmed is when the operator confirmed the running step (zero when it
// has no instruction).
func (r *stepRun) confirmed() time.Time {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	return r.d.steps[r.i].Confirmed
}

// WaitFor polls cond every interval until it holds, ctx ends or timeout,
// and reports whether it held.
func WaitFor(ctx context.Context, timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return cond()
		case <-tk.C:
		}
	}
}
