package tui

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kmirror/kmirror/themes"
)

// Tick bounds: faster than 250ms only burns CPU over SSH; slower than 10s
// makes a drill feel frozen.
const (
	DefaultTick = time.Second
	MinTick     = 250 * time.Millisecond
	MaxTick     = 10 * time.Second
)

// tickSteps are the intervals + and - move between.
var tickSteps = []time.Duration{
	250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2 * time.Second, 5 * time.Second, MaxTick,
}

// Options configure the console.
type Options struct {
	// ReadOnly removes every action key: the console only watches.
	ReadOnly bool
	// Theme is "dark", "light" or "high-contrast"; empty picks dark or
	// light from the terminal's background colour when it answers.
	Theme string
	// ASCII draws borders and glyphs with ASCII only, for terminals whose
	// locale is not UTF-8 (Run also sets it from LANG/LC_ALL/LC_CTYPE).
	ASCII bool
	// NoColor renders without any colour (also implied by NO_COLOR).
	NoColor bool
	// Tick is the snapshot poll interval, clamped to 250ms..10s (default 1s).
	Tick time.Duration
	// LogPath is where the engine logs go; help shows it because the
	// console itself never writes logs to the terminal.
	LogPath string
	// Now is the console's clock (time.Now when nil). Tests inject a fixed
	// clock so nothing rendered depends on when they run.
	Now func() time.Time
	// Instance says the console runs an in-process instance (not only
	// observes): q then asks before quitting stops the partitions it owns.
	Instance bool
	// Drill, when set, shows the guided DR drill panel beside the screens.
	Drill DrillDriver
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.Theme != "" {
		if _, err := themes.ParseName(o.Theme); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Tick < 0 {
		errs = append(errs, fmt.Errorf("tick %s is negative", o.Tick))
	}
	return errors.Join(errs...)
}

// withDefaults fills unset fields and clamps the tick.
func (o Options) withDefaults() Options {
	if o.Theme == "" {
		o.Theme = themes.Dark.String()
	}
	if o.Tick == 0 {
		o.Tick = DefaultTick
	}
	o.Tick = clampTick(o.Tick)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// utf8Locale reports whether the locale the C library would pick, the first
// of LC_ALL, LC_CTYPE and LANG that is set, names UTF-8. Unset means the "C"
// locale, which is ASCII. Only Run reads the environment.
func utf8Locale(getenv func(string) string) bool {
	for _, name := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := getenv(name); v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}

// noColorEnv reports NO_COLOR as no-color.org defines it: set and not empty.
// Only Run reads the environment, so NewModel renders the same everywhere.
func noColorEnv() bool { return os.Getenv("NO_COLOR") != "" }

func clampTick(d time.Duration) time.Duration { return min(max(d, MinTick), MaxTick) }

// nextTick returns the step after d towards faster (shorter) or slower.
func nextTick(d time.Duration, faster bool) time.Duration {
	if faster {
		for i := len(tickSteps) - 1; i >= 0; i-- {
			if tickSteps[i] < d {
				return tickSteps[i]
			}
		}
		return MinTick
	}
	for _, s := range tickSteps {
		if s > d {
			return s
		}
	}
	return MaxTick
}
