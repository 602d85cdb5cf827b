package explore

import (
	"slices"
	"testing"
)

// TestExploreStepsReplay: a seed draws the same steps every time, within
// the bounds, of the enabled kinds only, each fitting the state the ones
// before it leave; and a printed list parses back to the same steps, so
// the line a failure prints replays it.
func TestExploreStepsReplay(t *testing.T) {
	all, err := kindsFrom("all")
	if err != nil {
		t.Fatal(err)
	}
	def, err := kindsFrom("")
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(200) {
		for _, enabled := range []map[kind]bool{all, def} {
			steps := scenarioSteps(seed, enabled)
			if again := scenarioSteps(seed, enabled); !slices.Equal(steps, again) {
				t.Fatalf("seed %d drew %s, then %s", seed, formatSteps(steps), formatSteps(again))
			}
			if len(steps) < 10 || len(steps) > 30 {
				t.Fatalf("seed %d drew %d steps", seed, len(steps))
			}
			m := newModel()
			for i, s := range steps {
				if !enabled[s.Kind] || !m.applicable(s) {
					t.Fatalf("seed %d step %d %s: not enabled or does not fit", seed, i+1, s)
				}
				m.apply(s)
			}
			parsed, err := parseSteps(formatSteps(steps))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(parsed, steps) {
				t.Fatalf("seed %d: %s parsed back as %s", seed, formatSteps(steps), formatSteps(parsed))
			}
		}
	}
	for _, bad := range []string{"nope", "produce:t0", "kill:x", "produce:t0:0:1:idem:extra"} {
		if _, err := parseSteps(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := kindsFrom("+nope"); err == nil {
		t.Error("an unknown kind was accepted")
	}
	if k, _ := kindsFrom("+rebuild,-foreign"); !k[kRebuild] || k[kForeign] {
		t.Errorf("+rebuild,-foreign gave rebuild %v, foreign %v", k[kRebuild], k[kForeign])
	}
}
