package metrics

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine"
)

// Check is one readiness check's outcome.
type Check struct {
	Name   string // joined, shards, destination
	OK     bool
	Detail string // why it fails, "" when it passes
}

// Readiness runs the readiness checks on h: an instance is ready once it
// is a member of the instances' group in good standing, owns shards, and
// the destination answers. An observer (a console without an instance)
// joins nothing: only the destination counts.
func Readiness(h engine.Health) []Check {
	var out []Check
	if !h.Observer {
		joined := Check{Name: "joined", OK: h.Member.Joined && h.Member.Writable && !h.Member.Suspended}
		switch {
		case !h.Member.Joined:
			joined.Detail = "not a member of the instances' group"
		case h.Member.Suspended:
			joined.Detail = "suspended: the instances' group may have given this instance's shards to another; waiting to be assigned shards again"
		case !h.Member.Writable:
			joined.Detail = "the instances' group has not answered lately: appends wait"
		}
		out = append(out, joined)
		shards := Check{Name: "shards", OK: h.Member.Shards > 0}
		if !shards.OK {
			shards.Detail = "no shard of __mirror_state assigned and replayed here"
		}
		out = append(out, shards)
	}
	dest := Check{Name: "destination", OK: !h.DestReach.Down && !h.DestReach.LastOK.IsZero()}
	switch {
	case h.DestReach.Down:
		dest.Detail = fmt.Sprintf("does not answer since %s: %s", h.DestReach.DownSince.UTC().Format(time.RFC3339), h.DestReach.Error)
	case !dest.OK:
		dest.Detail = "not checked yet"
	}
	return append(out, dest)
}

// healthOf is a snapshot's health.
func healthOf(s engine.Snapshot) engine.Health {
	return engine.Health{Observer: s.Observer, Member: s.Member, DestReach: s.DestReach}
}

// healthz answers while the process serves HTTP at all: liveness.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 when every readiness check passes and 503 otherwise,
// one line per check.
func readyz(health func() engine.Health) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		checks := Readiness(health())
		var b strings.Builder
		status := http.StatusOK
		for _, c := range checks {
			if c.OK {
				fmt.Fprintf(&b, "ok   %s\n", c.Name)
				continue
			}
			status = http.StatusServiceUnavailable
			fmt.Fprintf(&b, "FAIL %s: %s\n", c.Name, c.Detail)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprint(w, b.String())
	}
}
