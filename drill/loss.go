package drill

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/sandbox"
)

// LostPartition is one partition's share of what the failover lost: the
// records A acknowledged to its producers that B never got.
type LostPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Records   int64  `json:"records"`
	// Offsets are the lost records' offsets on A, as ranges ("103-104, 110").
	Offsets string `json:"offsets"`
	// LME is the forward mirror's last mirrored offset when it stopped.
	LME int64 `json:"lastMirroredOffset"`
	// OldestAck is when A acknowledged the oldest of them.
	OldestAck time.Time `json:"oldestAck"`
	// Diverged: the failback found the partition DIVERGED (A holds
	// records past what B has); Quarantined: how many of the lost records
	// the rebuild's quarantine holds.
	Diverged    bool  `json:"diverged"`
	Quarantined int64 `json:"quarantined"`
}

// lostByPartition groups the lost acknowledgements by partition, in topic
// order then partition order.
func lostByPartition(lost []sandbox.Ack, lme map[string]int64) []LostPartition {
	type acc struct {
		lp      LostPartition
		offsets []int64
	}
	by := map[string]*acc{}
	var keys []string
	for _, a := range lost {
		k := ptKey(a.Topic, a.Partition)
		x := by[k]
		if x == nil {
			l, ok := lme[k]
			if !ok {
				l = -1
			}
			x = &acc{lp: LostPartition{Topic: a.Topic, Partition: a.Partition, LME: l, OldestAck: a.At}}
			by[k] = x
			keys = append(keys, k)
		}
		x.lp.Records++
		x.offsets = append(x.offsets, a.Offset)
		if a.At.Before(x.lp.OldestAck) {
			x.lp.OldestAck = a.At
		}
	}
	order := topicOrder()
	slices.SortFunc(keys, func(a, b string) int {
		x, y := by[a].lp, by[b].lp
		if x.Topic != y.Topic {
			return order[x.Topic] - order[y.Topic]
		}
		return int(x.Partition - y.Partition)
	})
	out := make([]LostPartition, 0, len(keys))
	for _, k := range keys {
		x := by[k]
		x.lp.Offsets = offsetRanges(x.offsets)
		out = append(out, x.lp)
	}
	return out
}

// topicOrder is each demo topic's place in sandbox.Topics.
func topicOrder() map[string]int {
	out := map[string]int{}
	for i, t := range sandbox.Topics {
		out[t.Name] = i
	}
	return out
}

// offsetRanges writes offsets as sorted ranges: "103-104, 110".
func offsetRanges(offs []int64) string {
	offs = slices.Clone(offs)
	slices.Sort(offs)
	offs = slices.Compact(offs)
	var parts []string
	for i := 0; i < len(offs); {
		j := i
		for j+1 < len(offs) && offs[j+1] == offs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(offs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", offs[i], offs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// lossLine is one partition's loss in a line of the step log; the report
// has every offset.
func lossLine(lp LostPartition, outage time.Time) string {
	offs := lp.Offsets
	if rs := strings.Split(offs, ", "); len(rs) > 4 {
		offs = strings.Join(rs[:4], ", ") + fmt.Sprintf(", … (%d ranges)", len(rs))
	}
	return fmt.Sprintf("%-12s %s at offsets %s (LME %d; acknowledged from %s before the outage)",
		ptKey(lp.Topic, lp.Partition), plural(lp.Records, "record"), offs, lp.LME, outage.Sub(lp.OldestAck).Round(time.Millisecond))
}

// ElectionLoss is what a simulated unclean leader election on A lost: the
// records A had acknowledged at and after the offset where the new
// leader's log ended.
type ElectionLoss struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	OldEpoch  int32     `json:"oldEpoch"`
	EndOffset int64     `json:"endOffset"` // the new leader's log ended here
	OldLeader int32     `json:"oldLeader"`
	NewLeader int32     `json:"newLeader"`
	At        time.Time `json:"at"`
	Records   int64     `json:"records"`
	Offsets   string    `json:"offsets"`
	IDs       []string  `json:"ids"`
	// OnB are the lost records the mirror had copied before the election:
	// B holds the only copy. Nowhere is the rest: lost on every cluster.
	OnB     int64 `json:"onB"`
	Nowhere int64 `json:"nowhere"`
	// Unacknowledged were written by the failed leader from EndOffset on
	// without an acknowledgement reaching the producer.
	Unacknowledged int64 `json:"unacknowledged"`
	// MirrorError is how the mirror reported the election.
	MirrorError string `json:"mirrorError,omitempty"`
	Simulated   string `json:"simulated"`
}

// electionLoss returns what an election at el.EndOffset lost: the records
// the failed leader wrote from that offset on (written, the ids read from
// A with the old epoch) that A had acknowledged.
func electionLoss(el sandbox.Election, written map[string]bool, acks []sandbox.Ack) ElectionLoss {
	out := ElectionLoss{Topic: el.Topic, Partition: el.Partition, OldEpoch: el.OldEpoch, EndOffset: el.EndOffset,
		OldLeader: el.OldLeader, NewLeader: el.NewLeader, At: el.At, IDs: []string{},
		Simulated: "kfake cannot truncate a log: A answers as a broker whose new leader's log ends at the offset (OffsetForLeaderEpoch, a fetch's diverging epoch) but keeps the records physically"}
	var offs []int64
	for _, a := range acks {
		if a.Side == sandbox.SideA && a.Topic == el.Topic && a.Partition == el.Partition && written[a.ID] {
			out.IDs = append(out.IDs, a.ID)
			offs = append(offs, a.Offset)
		}
	}
	out.Records, out.Offsets = int64(len(offs)), offsetRanges(offs)
	out.Unacknowledged = int64(len(written)) - out.Records
	return out
}
