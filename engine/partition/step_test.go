package partition

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const epoch0 = 7

// base is the status the table starts from in each state: Desired is what
// leads to that state, and FAILED has a retryable failure whose retry is due
// at t0.
func base(st State) Status {
	s := Status{State: st, StateEpoch: epoch0, Desired: DesiredStart}
	switch st {
	case Pausing, Paused:
		s.Desired = DesiredPause
	case Stopping, Stopped:
		s.Desired = DesiredStop
	case Failed:
		s.PrevState, s.Attempt, s.Error, s.Cause, s.Retryable, s.NextRetry = Mirroring, 2, "broker down", CauseTransient, true, t0
	case Unknown:
		s.Desired = DesiredNone
	case LogAlignment, EpochFencing, Mirroring, ULERecovery:
	}
	return s
}

// sample returns an event of kind k; results carry the current epoch.
func sample(k EventKind) Event {
	switch k {
	case KindStart:
		return Start{}
	case KindPause:
		return Pause{}
	case KindResume:
		return Resume{}
	case KindStop:
		return Stop{}
	case KindRecover:
		return Recover{}
	case KindAligned:
		return Aligned{Epoch: epoch0, Mode: AlignResume}
	case KindAlignmentDiverged:
		return AlignmentDiverged{Epoch: epoch0, Reason: "destination has 3 records beyond the LME"}
	case KindFenced:
		return Fenced{Epoch: epoch0, WriterID: 42, WriterEpoch: 3}
	case KindFetcherRemoved:
		return FetcherRemoved{Epoch: epoch0}
	case KindStopCompleted:
		return StopCompleted{Epoch: epoch0}
	case KindError:
		return Error{Epoch: epoch0, Err: "connection refused", Retryable: true, Cause: CauseTransient, Now: t0, Jitter: 0.5}
	case KindTick:
		return Tick{Now: t0.Add(time.Second)}
	case KindULEDetected:
		return ULEDetected{Epoch: epoch0, Enabled: true}
	case KindULERecovered:
		return ULERecovered{Epoch: epoch0}
	case KindRestored:
		return Restored{}
	case KindConfigure:
		return Configure{}
	case KindProgressed:
		return Progressed{Epoch: epoch0}
	case KindSourceReachable:
		return SourceReachable{}
	}
	panic("no sample for " + k.String())
}

type outcome int8

const (
	transition outcome = iota
	ignored
	rejected
)

type cell struct {
	out  outcome
	to   State
	work []Action // actions after Persist and Emit
}

func to_(st State, work ...Action) cell { return cell{out: transition, to: st, work: work} }

var (
	rej = cell{out: rejected}
	nop = cell{out: ignored}
	// A retryable error from a state with Attempt 0: retry 1 after 0.5·100ms.
	failRetry = to_(Failed, Halt{}, ScheduleRetry{At: t0.Add(50 * time.Millisecond)})
	stopping  = to_(Stopping, RunStopSequence{})
)

// want lists, per state, the outcome of every event kind in EventKinds order:
// Start Pause Resume Stop Recover | Aligned Diverged Fenced FetcherRemoved
// StopCompleted Error | Tick ULEDetected ULERecovered Restored Configure Progressed
// SourceReachable.
var want = map[State][]cell{
	Unknown: {to_(LogAlignment, StartAlignment{}), to_(Paused), rej, stopping, rej,
		rej, rej, rej, rej, rej, rej,
		nop, rej, rej, nop, nop, rej, nop},
	LogAlignment: {nop, to_(Pausing, RemoveFetcher{}), rej, stopping, rej,
		to_(EpochFencing, StartFencing{}), to_(Failed, Halt{}), rej, rej, rej, failRetry,
		nop, to_(ULERecovery, Halt{}, StartULERecovery{}), rej, to_(LogAlignment, StartAlignment{}), nop, rej, nop},
	EpochFencing: {nop, to_(Pausing, RemoveFetcher{}), rej, stopping, rej,
		rej, rej, to_(Mirroring, StartFetching{}), rej, rej, failRetry,
		nop, rej, rej, to_(LogAlignment, StartAlignment{}), nop, rej, nop},
	Mirroring: {nop, to_(Pausing, RemoveFetcher{}), rej, stopping, rej,
		rej, rej, rej, rej, rej, failRetry,
		nop, to_(ULERecovery, Halt{}, StartULERecovery{}), rej, to_(LogAlignment, StartAlignment{}), nop, nop, nop},
	Pausing: {rej, nop, rej, stopping, rej,
		rej, rej, rej, to_(Paused), rej, failRetry,
		nop, rej, rej, to_(Paused), nop, rej, nop},
	Paused: {to_(LogAlignment, StartAlignment{}), nop, to_(LogAlignment, StartAlignment{}), stopping, rej,
		rej, rej, rej, rej, rej, rej,
		nop, rej, rej, to_(Paused), nop, rej, nop},
	Stopping: {rej, rej, rej, nop, rej,
		rej, rej, rej, rej, to_(Stopped), failRetry,
		nop, rej, rej, to_(Stopping, RunStopSequence{}), nop, rej, nop},
	Stopped: {to_(LogAlignment, StartAlignment{}), rej, rej, nop, rej,
		rej, rej, rej, rej, rej, rej,
		nop, rej, rej, to_(Stopped), nop, rej, nop},
	Failed: {rej, to_(Paused), rej, stopping, to_(LogAlignment, StartAlignment{}),
		rej, rej, rej, rej, rej, rej,
		to_(LogAlignment, StartAlignment{}), rej, rej, to_(Failed, ScheduleRetry{At: t0}), nop, rej, nop},
	ULERecovery: {nop, rej, rej, stopping, rej,
		rej, rej, rej, rej, rej, failRetry,
		nop, rej, to_(LogAlignment, StartAlignment{}), to_(ULERecovery, StartULERecovery{}), nop, rej, nop},
}

func TestStepTable(t *testing.T) {
	for _, st := range States {
		row, ok := want[st]
		if !ok || len(row) != len(EventKinds) {
			t.Fatalf("table row for %s has %d cells, want %d", st, len(row), len(EventKinds))
		}
		for i, k := range EventKinds {
			s, ev, w := base(st), sample(k), row[i]
			t.Run(st.String()+"/"+k.String(), func(t *testing.T) {
				if ev.Kind() != k {
					t.Fatalf("sample kind %s", ev.Kind())
				}
				next, acts := Step(s, ev)
				err := Check(s, ev)
				switch w.out {
				case rejected:
					var re *RejectedError
					if !errors.As(err, &re) || !errors.Is(err, ErrRejected) {
						t.Fatalf("Check = %v, want *RejectedError", err)
					}
					if re.State != st || re.Event != k || re.Reason == "" || re.Stale {
						t.Fatalf("rejection %+v does not name state, event and reason", re)
					}
					if !strings.Contains(err.Error(), st.String()) {
						t.Fatalf("rejection text %q does not name the state", err)
					}
					if next != s || acts != nil {
						t.Fatalf("rejected event changed status to %+v or returned %v", next, acts)
					}
				case ignored:
					if err != nil || next != s || len(acts) != 0 {
						t.Fatalf("want no-op, got err %v, status %+v, actions %v", err, next, acts)
					}
				case transition:
					if err != nil {
						t.Fatalf("Check = %v, want nil", err)
					}
					if next.State != w.to || next.StateEpoch != s.StateEpoch+1 {
						t.Fatalf("got %s epoch %d, want %s epoch %d", next.State, next.StateEpoch, w.to, s.StateEpoch+1)
					}
					if len(acts) < 2 || acts[0] != (Persist{Status: next}) {
						t.Fatalf("first action %v is not Persist of the new status", acts)
					}
					if _, ok := acts[1].(Emit); !ok {
						t.Fatalf("second action %v is not Emit", acts[1])
					}
					if got := acts[2:]; !reflect.DeepEqual(got, w.work) && (len(got) != 0 || len(w.work) != 0) {
						t.Fatalf("work = %#v, want %#v", got, w.work)
					}
				}
			})
		}
	}
}

func TestStaleResultsRejected(t *testing.T) {
	for _, st := range States {
		for _, k := range EventKinds {
			ev := sample(k)
			if _, isResult := resultEpoch(ev); !isResult {
				continue
			}
			s := base(st)
			s.StateEpoch++ // the event now belongs to an older epoch
			next, acts, err := Apply(s, ev)
			if !errors.Is(err, ErrStale) || !errors.Is(err, ErrRejected) || next != s || acts != nil {
				t.Errorf("%s/%s: stale result gave err %v, actions %v", st, k, err, acts)
			}
		}
	}
}

func TestNilEventRejected(t *testing.T) {
	if err := Check(Status{}, nil); !errors.Is(err, ErrRejected) {
		t.Fatalf("Check(nil) = %v", err)
	}
}

// mustStep applies ev and fails the test on a rejection.
func mustStep(t *testing.T, s Status, ev Event) (Status, []Action) {
	t.Helper()
	next, acts, err := Apply(s, ev)
	if err != nil {
		t.Fatalf("%s in %s: %v", ev.Kind(), s.State, err)
	}
	return next, acts
}

// toMirroring drives a partition from alignment to MIRRORING.
func toMirroring(t *testing.T, s Status) Status {
	t.Helper()
	s, _ = mustStep(t, s, Aligned{Epoch: s.StateEpoch})
	s, _ = mustStep(t, s, Fenced{Epoch: s.StateEpoch})
	if s.State != Mirroring {
		t.Fatalf("state %s, want MIRRORING", s.State)
	}
	return s
}

func TestRetryBackoffGrowsCapsAndExhausts(t *testing.T) {
	s, _ := mustStep(t, Status{}, Start{})
	s = toMirroring(t, s)
	now := t0
	for attempt := 1; attempt <= DefaultMaxAttempts; attempt++ {
		var acts []Action
		s, acts = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "timeout", Retryable: true, Cause: CauseTransient, Now: now, Jitter: 0.5})
		ceiling := min(DefaultMaxBackoff, DefaultInitialBackoff<<(attempt-1))
		wantAt := now.Add(ceiling / 2)
		if s.State != Failed || !s.Retryable || s.Attempt != attempt || !s.NextRetry.Equal(wantAt) {
			t.Fatalf("attempt %d: got %s retryable=%v attempt=%d next=%v, want next %v",
				attempt, s.State, s.Retryable, s.Attempt, s.NextRetry, wantAt)
		}
		if acts[len(acts)-1] != (ScheduleRetry{At: wantAt}) {
			t.Fatalf("attempt %d: last action %v", attempt, acts[len(acts)-1])
		}
		if attempt >= 13 && ceiling != DefaultMaxBackoff {
			t.Fatalf("attempt %d: ceiling %v not capped", attempt, ceiling)
		}
		// Not due yet: nothing happens.
		if next, acts := mustStep(t, s, Tick{Now: wantAt.Add(-time.Nanosecond)}); next != s || acts != nil {
			t.Fatalf("early tick moved the partition")
		}
		now = wantAt
		s, _ = mustStep(t, s, Tick{Now: now})
		if s.State != LogAlignment || s.Attempt != attempt {
			t.Fatalf("retry %d: got %s attempt %d", attempt, s.State, s.Attempt)
		}
	}
	s, acts := mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "timeout", Retryable: true, Now: now, Jitter: 0.5})
	if s.State != Failed || s.Retryable || s.Attempt != DefaultMaxAttempts ||
		!strings.Contains(s.Error, "retries exhausted after 20 attempts: timeout") || !s.NextRetry.IsZero() {
		t.Fatalf("after max attempts: %+v", s)
	}
	for _, a := range acts {
		if _, ok := a.(ScheduleRetry); ok {
			t.Fatalf("exhausted partition scheduled a retry: %v", acts)
		}
	}
	if next, acts := mustStep(t, s, Tick{Now: now.Add(time.Hour)}); next != s || acts != nil {
		t.Fatalf("exhausted partition retried on tick")
	}
	s, _ = mustStep(t, s, Recover{})
	if s.State != LogAlignment || s.Attempt != 0 || s.Error != "" || s.Retryable {
		t.Fatalf("after recover: %+v", s)
	}
}

func TestAttemptResetOnProgressInMirroring(t *testing.T) {
	s, _ := mustStep(t, Status{}, Start{})
	s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "x", Retryable: true, Now: t0, Jitter: 0.1})
	s, _ = mustStep(t, s, Tick{Now: s.NextRetry})
	s, _ = mustStep(t, s, Aligned{Epoch: s.StateEpoch})
	if s.Attempt != 1 {
		t.Fatalf("attempt dropped before MIRRORING: %d", s.Attempt)
	}
	s, _ = mustStep(t, s, Fenced{Epoch: s.StateEpoch})
	if s.State != Mirroring || s.Attempt != 1 {
		t.Fatalf("got %s attempt %d, want MIRRORING attempt 1: reaching MIRRORING proves nothing yet", s.State, s.Attempt)
	}
	epoch := s.StateEpoch
	var acts []Action
	s, acts = mustStep(t, s, Progressed{Epoch: s.StateEpoch})
	if s.State != Mirroring || s.Attempt != 0 || s.StateEpoch != epoch || len(acts) != 1 || acts[0] != (Persist{Status: s}) {
		t.Fatalf("progress: %s attempt %d epoch %d actions %v, want MIRRORING attempt 0, same epoch, persisted", s.State, s.Attempt, s.StateEpoch, acts)
	}
	if next, acts := mustStep(t, s, Progressed{Epoch: s.StateEpoch}); next != s || acts != nil {
		t.Fatalf("second progress changed %+v %v", next, acts)
	}
	s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "x", Retryable: true, Now: t0, Jitter: 1})
	if s.Attempt != 1 || !s.NextRetry.Equal(t0.Add(DefaultInitialBackoff)) {
		t.Fatalf("backoff did not start over: attempt %d next %v", s.Attempt, s.NextRetry)
	}
}

func TestConfigureChangesRetrySettings(t *testing.T) {
	s, _ := mustStep(t, Status{}, Start{})
	s, _ = mustStep(t, s, Configure{Config: Config{InitialBackoff: time.Second, MaxBackoff: 3 * time.Second, MaxAttempts: 2}})
	if s.StateEpoch != 1 {
		t.Fatalf("Configure bumped the epoch to %d", s.StateEpoch)
	}
	wantDelay := []time.Duration{time.Second, 2 * time.Second}
	for i, d := range wantDelay {
		s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "x", Retryable: true, Now: t0, Jitter: 0.999999999})
		if got := s.NextRetry.Sub(t0); got < d-time.Millisecond || got > d {
			t.Fatalf("retry %d delay %v, want just under %v", i+1, got, d)
		}
		s, _ = mustStep(t, s, Tick{Now: s.NextRetry})
	}
	s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "x", Retryable: true, Now: t0})
	if s.Retryable || s.Attempt != 2 {
		t.Fatalf("want exhaustion after 2 attempts, got %+v", s)
	}
}

func TestFatalCausesAreNotRetried(t *testing.T) {
	for _, c := range Causes {
		s, _ := mustStep(t, Status{}, Start{})
		s, acts := mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "e", Retryable: true, Cause: c, Now: t0})
		if s.Retryable == c.Fatal() {
			t.Errorf("cause %q: retryable=%v, fatal=%v", c, s.Retryable, c.Fatal())
		}
		if c == CauseNone && s.Cause != CauseOther {
			t.Errorf("missing cause recorded as %q, want other", s.Cause)
		}
		if !s.Retryable && (!s.NextRetry.IsZero() || len(acts) != 3) {
			t.Errorf("cause %q: non-retryable failure scheduled work %v", c, acts)
		}
	}
	s, _ := mustStep(t, Status{}, Start{})
	s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "auth", Retryable: false, Cause: CauseTransient, Now: t0})
	if s.Retryable {
		t.Fatal("error reported non-retryable was retried")
	}
}

func TestRetryFollowsDesiredState(t *testing.T) {
	tests := []struct {
		name string
		cmd  Event
		want State
		work Action
	}{
		{"failed while stopping retries the stop", Stop{}, Stopping, RunStopSequence{}},
		{"failed while pausing ends paused", Pause{}, Paused, nil},
	}
	for _, tt := range tests {
		s, _ := mustStep(t, Status{}, Start{})
		s = toMirroring(t, s)
		s, _ = mustStep(t, s, tt.cmd)
		s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "x", Retryable: true, Now: t0})
		if s.PrevState == Mirroring || s.State != Failed {
			t.Fatalf("%s: %+v", tt.name, s)
		}
		s, acts := mustStep(t, s, Tick{Now: s.NextRetry})
		if s.State != tt.want || (tt.work != nil && acts[len(acts)-1] != tt.work) {
			t.Errorf("%s: got %s %v", tt.name, s.State, acts)
		}
	}
	// Recover honours the desired state too: a failed stop is not turned
	// back into mirroring by --recover.
	s, _ := mustStep(t, Status{}, Stop{})
	s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "x", Cause: CauseTxnAborted, Now: t0})
	s, _ = mustStep(t, s, Recover{Rebuild: true})
	if s.State != Stopping || s.Rebuild {
		t.Fatalf("recover of a failed stop: %+v", s)
	}
}

func TestRecoverWithRebuild(t *testing.T) {
	s, _ := mustStep(t, Status{}, Start{})
	s, _ = mustStep(t, s, AlignmentDiverged{Epoch: s.StateEpoch, Reason: "extra records"})
	if s.State != Failed || s.Retryable || s.Cause != CauseDiverged || s.PrevState != LogAlignment {
		t.Fatalf("divergence without rebuild: %+v", s)
	}
	s, acts := mustStep(t, s, Recover{Rebuild: true})
	if s.State != LogAlignment || !s.Rebuild || acts[2] != (StartAlignment{Rebuild: true}) {
		t.Fatalf("recover with rebuild: %+v %v", s, acts)
	}
	next, acts := mustStep(t, s, AlignmentDiverged{Epoch: s.StateEpoch, Reason: "extra records"})
	if next != s || len(acts) != 2 || acts[1] != (Rebuild{}) {
		t.Fatalf("divergence with rebuild allowed: %+v %v", next, acts)
	}
	s, _ = mustStep(t, s, Restored{}) // a crash mid-rebuild keeps the permission
	if !s.Rebuild {
		t.Fatal("rebuild permission lost on takeover")
	}
	s, _ = mustStep(t, s, Aligned{Epoch: s.StateEpoch, Mode: AlignFresh})
	if s.State != EpochFencing || s.Rebuild {
		t.Fatalf("after rebuild: %+v", s)
	}
}

func TestRecreatedSourceTopicRefusesRebuild(t *testing.T) {
	tests := []struct {
		name    string
		rebuild bool
		want    State // Failed: rejected, the partition stays FAILED
	}{
		{"recover with rebuild is refused", true, Failed},
		{"plain recover retries the alignment", false, LogAlignment},
	}
	for _, tt := range tests {
		s, _ := mustStep(t, Status{}, Start{})
		s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "source topic recreated", Retryable: true, Cause: CauseSourceTopicRecreated, Now: t0})
		if s.State != Failed || s.Retryable || !s.NextRetry.IsZero() {
			t.Fatalf("%s: recreated source topic: %+v", tt.name, s)
		}
		next, acts, err := Apply(s, Recover{Rebuild: tt.rebuild})
		if tt.want == Failed {
			var rej *RejectedError
			if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "rebuild refused") || next != s || len(acts) != 0 {
				t.Errorf("%s: got %+v %v %v", tt.name, next, acts, err)
			}
			continue
		}
		if err != nil || next.State != tt.want || next.Rebuild {
			t.Errorf("%s: got %+v %v", tt.name, next, err)
		}
	}
}

// A destination that aborted a mirrored transaction has diverged with a
// cause of its own: FAILED saying so, and rebuilt like any divergence when
// the operator allows it.
func TestTxnAbortedDivergenceKeepsItsCause(t *testing.T) {
	s, _ := mustStep(t, Status{}, Start{})
	s, _ = mustStep(t, s, AlignmentDiverged{Epoch: s.StateEpoch, Reason: "coordinator abort", Cause: CauseTxnAborted})
	if s.State != Failed || s.Retryable || s.Cause != CauseTxnAborted || s.Error != "coordinator abort" {
		t.Fatalf("txn-aborted divergence: %+v", s)
	}
	s, _ = mustStep(t, s, Recover{Rebuild: true})
	_, acts := mustStep(t, s, AlignmentDiverged{Epoch: s.StateEpoch, Reason: "coordinator abort", Cause: CauseTxnAborted})
	if len(acts) != 2 || acts[1] != (Rebuild{}) {
		t.Fatalf("txn-aborted divergence with rebuild allowed: %v", acts)
	}
}

func TestULEDisabledFailsForGood(t *testing.T) {
	s, _ := mustStep(t, Status{}, Start{})
	s = toMirroring(t, s)
	s, _ = mustStep(t, s, ULEDetected{Epoch: s.StateEpoch, Enabled: false})
	if s.State != Failed || s.Retryable || s.Cause != CauseULE {
		t.Fatalf("ULE with recovery disabled: %+v", s)
	}
}

func TestStateEpochStrictlyIncreases(t *testing.T) {
	s := Status{}
	script := []func(Status) Event{
		func(Status) Event { return Start{} },
		func(s Status) Event { return Aligned{Epoch: s.StateEpoch} },
		func(s Status) Event { return Fenced{Epoch: s.StateEpoch} },
		func(Status) Event { return Pause{} },
		func(s Status) Event { return FetcherRemoved{Epoch: s.StateEpoch} },
		func(Status) Event { return Resume{} },
		func(s Status) Event { return Error{Epoch: s.StateEpoch, Err: "x", Retryable: true, Now: t0} },
		func(s Status) Event { return Tick{Now: s.NextRetry} },
		func(s Status) Event { return ULEDetected{Epoch: s.StateEpoch, Enabled: true} },
		func(s Status) Event { return ULERecovered{Epoch: s.StateEpoch} },
		func(Status) Event { return Restored{} },
		func(Status) Event { return Stop{} },
		func(s Status) Event { return StopCompleted{Epoch: s.StateEpoch} },
		func(Status) Event { return Start{} },
	}
	for i, mk := range script {
		ev := mk(s)
		next, acts := mustStep(t, s, ev)
		if next.StateEpoch != s.StateEpoch+1 {
			t.Fatalf("step %d (%s): epoch %d → %d", i, ev.Kind(), s.StateEpoch, next.StateEpoch)
		}
		if acts[0] != (Persist{Status: next}) {
			t.Fatalf("step %d (%s): first action %v", i, ev.Kind(), acts[0])
		}
		s = next
	}
	if s.State != LogAlignment || s.Desired != DesiredStart {
		t.Fatalf("restart after stop: %+v", s)
	}
}

func TestEnumStrings(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range EventKinds {
		name := k.String()
		if strings.HasPrefix(name, "EventKind(") || seen[name] {
			t.Errorf("event kind %d has name %q", k, name)
		}
		seen[name] = true
	}
	if got := EventKind(99).String(); got != "EventKind(99)" {
		t.Errorf("unknown kind = %q", got)
	}
	for _, st := range States {
		b, err := st.MarshalText()
		var back State
		if err != nil || back.UnmarshalText(b) != nil || back != st {
			t.Errorf("state %s does not round-trip as text", st)
		}
	}
	if err := new(State).UnmarshalText([]byte("RUNNING")); err == nil {
		t.Error("unknown state name accepted")
	}
	for _, d := range []Desired{DesiredNone, DesiredStart, DesiredPause, DesiredStop} {
		b, _ := d.MarshalText()
		var back Desired
		if back.UnmarshalText(b) != nil || back != d {
			t.Errorf("desired %q does not round-trip", d)
		}
	}
	for _, c := range Causes {
		b, _ := c.MarshalText()
		var back Cause
		if back.UnmarshalText(b) != nil || back != c {
			t.Errorf("cause %q does not round-trip", c)
		}
	}
	if AlignFresh.String() != "fresh" || SeverityWarn.String() != "WARN" {
		t.Error("AlignMode or Severity names changed")
	}
}

// TestSourceUnreachableRetriesWithoutEnd: a partition FAILED because its
// source does not answer keeps its retries going past the attempt limit,
// counts each retry that falls due while the source is still down without
// leaving FAILED, and retries at once when the source answers again.
func TestSourceUnreachableRetriesWithoutEnd(t *testing.T) {
	s := base(Mirroring)
	s.Attempt = s.Config.WithDefaults().MaxAttempts
	s, acts, err := Apply(s, Error{Epoch: s.StateEpoch, Err: "source unreachable", Retryable: true, Cause: CauseSourceUnreachable, Now: t0, Jitter: 0.5})
	if err != nil || s.State != Failed || !s.Retryable || s.Cause != CauseSourceUnreachable {
		t.Fatalf("after the attempts limit: %+v %v", s, err)
	}
	if !hasAction[ScheduleRetry](acts) {
		t.Fatalf("no retry scheduled: %v", acts)
	}
	attempt, epoch := s.Attempt, s.StateEpoch
	s, acts, err = Apply(s, Tick{Now: s.NextRetry, SourceUnreachable: "source a:9092 unreachable since 10:00:00", Jitter: 0.5})
	if err != nil || s.State != Failed || s.Attempt != attempt+1 || s.StateEpoch != epoch || s.Error != "source a:9092 unreachable since 10:00:00" {
		t.Fatalf("retry while still unreachable: %+v %v", s, err)
	}
	if !hasAction[Persist](acts) || !hasAction[ScheduleRetry](acts) || hasAction[StartAlignment](acts) {
		t.Fatalf("retry while still unreachable: actions %v", acts)
	}
	next, acts, err := Apply(s, SourceReachable{})
	if err != nil || next.State != LogAlignment || !hasAction[StartAlignment](acts) {
		t.Fatalf("source reachable again: %+v %v %v", next, acts, err)
	}
	// A stop recorded meanwhile runs at the next retry, source or not.
	s.Desired = DesiredStop
	next, acts, err = Apply(s, Tick{Now: s.NextRetry, SourceUnreachable: "down", Jitter: 0.5})
	if err != nil || next.State != Stopping || !hasAction[RunStopSequence](acts) {
		t.Fatalf("stop while unreachable: %+v %v %v", next, acts, err)
	}
	// Other causes ignore the source's state.
	other := base(Failed)
	if got, _, _ := Apply(other, SourceReachable{}); got.State != Failed {
		t.Fatalf("a transient failure retried on SourceReachable: %s", got.State)
	}
}

func hasAction[A Action](acts []Action) bool {
	for _, a := range acts {
		if _, ok := a.(A); ok {
			return true
		}
	}
	return false
}

func TestNoRetriesFailsForGood(t *testing.T) {
	s, _ := mustStep(t, Status{Config: Config{MaxAttempts: NoRetries}}, Start{})
	s = toMirroring(t, s)
	s, acts := mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "timeout", Retryable: true, Cause: CauseTransient, Now: t0, Jitter: 0.5})
	if s.State != Failed || s.Retryable || s.Attempt != 0 || !strings.Contains(s.Error, "retries disabled") {
		t.Fatalf("first error with no retries: %+v", s)
	}
	for _, a := range acts {
		if _, ok := a.(ScheduleRetry); ok {
			t.Fatalf("scheduled a retry: %v", acts)
		}
	}
	// An outage of the source is still waited out, as KIP-1279 resumes by itself.
	s, _ = mustStep(t, Status{Config: Config{MaxAttempts: NoRetries}}, Start{})
	s = toMirroring(t, s)
	s, _ = mustStep(t, s, Error{Epoch: s.StateEpoch, Err: "down", Retryable: true, Cause: CauseSourceUnreachable, Now: t0, Jitter: 0.5})
	if !s.Retryable {
		t.Fatalf("source outage with no retries: %+v", s)
	}
}

// A fatal fault found outside the data path (the metadata refresh seeing
// another source cluster) fails a partition in every state but STOPPED,
// including PAUSED (nothing running) and FAILED waiting for a retry; a
// retryable one found outside leaves those two alone.
func TestFatalFaultFailsIdlePartitions(t *testing.T) {
	fatal := func(s Status) Error {
		return Error{Epoch: s.StateEpoch, Err: "source cluster changed", Cause: CauseSourceClusterChanged, Now: t0}
	}
	tests := []struct {
		from     State
		ok       bool
		prev     State // where recover returns it
		retryOut State // the state a recover leads to
	}{
		{Paused, true, Paused, Paused},
		{Failed, true, Mirroring, LogAlignment},
		{Mirroring, true, Mirroring, LogAlignment},
		{Stopped, false, Unknown, Stopped},
		{Unknown, false, Unknown, Unknown},
	}
	for _, tt := range tests {
		s := base(tt.from)
		next, acts, err := Apply(s, fatal(s))
		if !tt.ok {
			if err == nil || next != s {
				t.Errorf("%s: %+v %v, want rejected", tt.from, next, err)
			}
			continue
		}
		if err != nil || next.State != Failed || next.Retryable || next.Cause != CauseSourceClusterChanged ||
			next.PrevState != tt.prev || !next.NextRetry.IsZero() {
			t.Errorf("%s: %+v %v, want FAILED non-retryable source_cluster_changed from %s", tt.from, next, err, tt.prev)
			continue
		}
		if p, ok := acts[0].(Persist); !ok || p.Status != next {
			t.Errorf("%s: first action %+v, want the new status persisted", tt.from, acts[0])
		}
		// A tick never retries it; recover returns it where it was.
		if n, _ := mustStep(t, next, Tick{Now: t0.Add(time.Hour)}); n != next {
			t.Errorf("%s: a tick moved it: %+v", tt.from, n)
		}
		if n, _ := mustStep(t, next, Recover{}); n.State != tt.retryOut {
			t.Errorf("%s: recover led to %s, want %s", tt.from, n.State, tt.retryOut)
		}
	}
	// Retryable trouble found outside still leaves PAUSED and FAILED be.
	for _, st := range []State{Paused, Failed} {
		s := base(st)
		if _, _, err := Apply(s, Error{Epoch: s.StateEpoch, Err: "down", Retryable: true, Cause: CauseSourceUnreachable, Now: t0}); err == nil {
			t.Errorf("%s: a retryable fault applied", st)
		}
	}
}
