package drill

import (
	"fmt"
	"strings"
	"time"

	"github.com/kmirror/kmirror/drill/step"
)

// Cost is one number the drill measured, explained (package step's, so
// the console can show it).
type Cost = step.Cost

// Costs explains the numbers of rep that have been measured so far, in the
// order the drill finds them: the loss, how far back it reaches, the
// unclean election's own loss, what the failback found and kept, the
// outage clients saw, and what the consumer group did twice.
func Costs(rep Report) []Cost {
	var out []Cost
	add := func(label, value, format string, args ...any) {
		out = append(out, Cost{Label: label, Value: value, Meaning: fmt.Sprintf(format, args...)})
	}
	rpo := rep.RPO
	switch {
	case !rpo.Known:
	case rpo.Method == RPOOffsets:
		add("RPO", fmt.Sprintf("%d offsets", rpo.Records),
			"A holds %d offsets the mirror never copied: writes producers were told were saved, gone unless A returns; lower lag loses fewer.", rpo.Records)
	case rpo.Records == 0 && rep.Scenario == ScenarioPlanned.String():
		add("RPO", "0 records",
			"Nothing A confirmed was lost: the producers stopped and the mirror caught up first; an unplanned outage costs whatever the lag holds then.")
	case rpo.Records == 0:
		add("RPO", "0 records",
			"Every write A confirmed had reached B: a sudden outage at this moment cost nothing.")
	default:
		where := ""
		if topics := lostTopics(rpo.ByTopic); len(topics) > 0 {
			where = " (" + strings.Join(topics, ", ") + ")"
		}
		add("RPO", plural(rpo.Records, "record"),
			"%d writes A told its producers were saved%s are not on B, gone for everyone now on B; lower lag behind A loses fewer.", rpo.Records, where)
	}
	if rpo.Known && rpo.Records > 0 {
		d := time.Duration(rpo.Seconds * float64(time.Second)).Round(time.Millisecond)
		add("RPO (time)", d.String(),
			"The loss reaches back %s, the mirror's lag across the WAN: a DR region closer to A (a shorter round trip) or more bandwidth shrinks it.", d)
	}
	if el := rep.Election; el != nil {
		add("unclean election", plural(el.Records, "record"),
			"A's new leader of %s/%d lacked %d writes A had confirmed (%d only on B, %d nowhere): acks=all with min.insync.replicas=2 and no unclean elections prevents it.",
			el.Topic, el.Partition, el.Records, el.OnB, el.Nowhere)
	}
	if n := divergedCount(rep.Failback); n > 0 {
		add("DIVERGED", plural(int64(n), "partition"),
			"A came back holding writes B never got on %s, so the failback stops there instead of overwriting them; less lag leaves fewer to sort out.", plural(int64(n), "partition"))
	} else if len(rep.Failback) > 0 {
		add("failback", "delta only",
			"A took back only what B received since the failover, with nothing to reconcile: the cheap failback a clean cutover buys.")
	}
	if q := rep.Quarantine; q != nil {
		add("quarantined", fmt.Sprintf("%d acknowledged", q.Acknowledged),
			"The rebuild kept exactly the %d lost writes (and %d A never confirmed) in quarantine topics on A: someone must replay or reconcile them by hand.",
			q.Acknowledged, q.NeverAcknowledged)
	}
	if rep.RTO.Seconds > 0 {
		d := time.Duration(rep.RTO.Seconds * float64(time.Second)).Round(time.Millisecond)
		since := "A went down"
		if rep.Scenario == ScenarioPlanned.String() {
			since = "the cutover began"
		}
		add("RTO", d.String(),
			"Clients worked on B again %s after %s, the outage customers saw; automating the client switch shortens it.", d, since)
	}
	if g := rep.Group; g != nil && rpo.Known && len(g.PositionsB) == 0 {
		add("processed twice", plural(g.Duplicates, "record"),
			"No offsets of the group had been synced to B, so it started on B from the earliest offset and processed %d %s records again: let the offset sync reach B before a failover and make processing idempotent.", g.Duplicates, g.Topic)
	} else if g != nil && rpo.Known {
		add("processed twice", plural(g.Duplicates, "record"),
			"The group resumed on B from offsets synced before the outage and processed %d %s records again: make processing idempotent or sync offsets more often.", g.Duplicates, g.Topic)
	}
	return out
}

// plural is n and the word, with an s unless n is 1.
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
