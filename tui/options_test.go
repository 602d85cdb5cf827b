package tui

import (
	"testing"
	"time"
)

func TestTickStepsStayInBounds(t *testing.T) {
	d := time.Second
	var faster []time.Duration
	for range 4 {
		d = nextTick(d, true)
		faster = append(faster, d)
	}
	want := []time.Duration{500 * time.Millisecond, MinTick, MinTick, MinTick}
	for i := range want {
		if faster[i] != want[i] {
			t.Fatalf("faster steps %v, want %v", faster, want)
		}
	}
	d = time.Second
	var slower []time.Duration
	for range 4 {
		d = nextTick(d, false)
		slower = append(slower, d)
	}
	want = []time.Duration{2 * time.Second, 5 * time.Second, MaxTick, MaxTick}
	for i := range want {
		if slower[i] != want[i] {
			t.Fatalf("slower steps %v, want %v", slower, want)
		}
	}
	if got := nextTick(3*time.Second, true); got != 2*time.Second {
		t.Errorf("faster from an off-step 3s: %s", got)
	}
}

func TestOptionDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.Tick != DefaultTick || o.Theme != "dark" || o.Now == nil {
		t.Fatalf("defaults %+v", o)
	}
	if got := (Options{Tick: time.Millisecond}).withDefaults().Tick; got != MinTick {
		t.Errorf("1ms clamped to %s", got)
	}
	if got := (Options{Tick: time.Hour}).withDefaults().Tick; got != MaxTick {
		t.Errorf("1h clamped to %s", got)
	}
}

func TestValidate(t *testing.T) {
	if err := (Options{Theme: "solarized"}).Validate(); err == nil {
		t.Error("unknown theme accepted")
	}
	if err := (Options{Tick: -time.Second}).Validate(); err == nil {
		t.Error("negative tick accepted")
	}
	for _, th := range []string{"", "dark", "light", "high-contrast"} {
		if err := (Options{Theme: th}).Validate(); err != nil {
			t.Errorf("theme %q: %v", th, err)
		}
	}
}

func TestNoColorEnv(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	if noColorEnv() {
		t.Error("empty NO_COLOR counted as set")
	}
	t.Setenv("NO_COLOR", "1")
	if !noColorEnv() {
		t.Error("NO_COLOR=1 ignored")
	}
}
