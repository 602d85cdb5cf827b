package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// GroupPartition is one partition of a synced group: committed offsets of a
// consumer group, share-partition start offsets of a share group.
type GroupPartition struct {
	Topic       string
	Partition   int32
	Source      int64 // committed (start offset) on the source, -1 none
	Destination int64 // written on the destination by the sync, -1 none
}

// GroupSnapshot is the offset sync status of one consumer or share group.
// For a share group the offsets are share-partition start offsets.
type GroupSnapshot struct {
	Group      string
	Kind       GroupKind
	LastSync   time.Time // zero: never synced
	SkipReason string    // why the group was not synced in the last run, "" if it was
	Skip       GroupSkip // SkipReason's class, SkipNone if it was synced
	Partitions []GroupPartition
}

// groupSync copies consumer-group offsets of mirrored topics from the
// source to the destination, so a group moved to the destination resumes
// where it was. A group with members on the destination is never touched
// (it is already consuming there); a STOPPED topic's offsets are never
// written again (after failover the destination's groups own them).
type groupSync struct {
	include, exclude []*regexp.Regexp
	interval         time.Duration
}

func compileAll(patterns []string) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, p := range patterns {
		if re, err := regexp.Compile("^(?:" + p + ")$"); err == nil {
			out = append(out, re)
		}
	}
	return out
}

func (g *groupSync) wants(group string) bool {
	match := func(res []*regexp.Regexp) bool {
		return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(group) })
	}
	return match(g.include) && !match(g.exclude)
}

// syncGroups runs until ctx ends, one sync of consumer groups and one of
// share groups per interval.
func (m *mirror) syncGroups(ctx context.Context) {
	if m.settings().groupSync.interval <= 0 {
		return
	}
	every(ctx, func() time.Duration { return m.settings().groupSync.interval }, func() {
		// Offsets committed on another cluster are not the source's:
		// a bootstrap that reaches one fails the mirror, as the
		// metadata refresh does, and nothing is committed.
		if err := m.checkSourceCluster(ctx); errors.Is(err, ErrSourceClusterChanged) {
			m.failSourceChanged(fmt.Errorf("mirror %s group offset sync: %w", m.cfg.Name, err))
			return
		}
		topics := m.syncedTopics()
		err := m.syncGroupsOnce(ctx, topics)
		if err != nil && ctx.Err() == nil {
			m.e.emit(LevelWarn, m.cfg.Name, "", -1, "group offset sync: "+err.Error())
		}
		serr := m.syncShareGroupsOnce(ctx, topics)
		if serr != nil && ctx.Err() == nil {
			m.e.emit(LevelWarn, m.cfg.Name, "", -1, "share-group offset sync: "+serr.Error())
		}
		m.mu.Lock()
		m.groupRounds++
		if err == nil && serr == nil {
			m.groupLast = m.e.now()
		}
		m.mu.Unlock()
	})
}

// syncedTopics are the topics whose group offsets are synced: mirrored and
// not stopped (topicStopped). After a failover the destination's own
// consumers own those offsets.
func (m *mirror) syncedTopics() []string {
	return m.notStopped(m.topicList())
}

func (m *mirror) syncGroupsOnce(ctx context.Context, topics []string) error {
	listed, err := m.src.adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list source groups: %w", err)
	}
	var groups []string
	for _, g := range listed.Sorted() {
		// Share groups are listed too; their offsets are not committed
		// offsets (see syncShareGroupsOnce).
		if g.GroupType != "share" && g.ProtocolType != "share" && m.settings().groupSync.wants(g.Group) {
			groups = append(groups, g.Group)
		}
	}
	if len(groups) == 0 || len(topics) == 0 {
		m.setGroups(GroupConsumer, nil)
		return nil
	}
	dstDesc, err := m.e.dst.adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("describe destination groups: %w", err)
	}
	starts, err := m.e.dst.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("destination log starts: %w", err)
	}
	ends, err := m.e.dst.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("destination log ends: %w", err)
	}
	var out []GroupSnapshot
	now := m.e.now()
	for _, g := range groups {
		gs := GroupSnapshot{Group: g}
		if d, ok := dstDesc[g]; ok && len(d.Members) > 0 {
			gs.skip(SkipActive, fmt.Sprintf("active on the destination (%d members): it consumes there already", len(d.Members)))
			out = append(out, gs)
			continue
		}
		committed, err := m.src.adm.FetchOffsetsForTopics(ctx, g, topics...)
		if err != nil {
			gs.skip(SkipSourceUnreadable, "fetch source offsets: "+err.Error())
			out = append(out, gs)
			continue
		}
		var commit kadm.Offsets
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil || o.At < 0 {
				return
			}
			s, okS := starts.Lookup(o.Topic, o.Partition)
			e, okE := ends.Lookup(o.Topic, o.Partition)
			if !okS || !okE || s.Err != nil || e.Err != nil {
				// Not on the destination yet (a partition just added
				// on the source): nothing to clamp to, so nothing is
				// committed rather than offset 0.
				return
			}
			at := max(s.Offset, min(o.At, e.Offset))
			commit.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: at, LeaderEpoch: -1})
			gs.Partitions = append(gs.Partitions, GroupPartition{Topic: o.Topic, Partition: o.Partition, Source: o.At, Destination: at})
		})
		if len(gs.Partitions) == 0 {
			gs.skip(SkipNoOffsets, "no committed offsets on mirrored topics")
			out = append(out, gs)
			continue
		}
		// A stop may have landed since the round listed the topics.
		for topic := range commit {
			if m.topicStopped(topic) {
				delete(commit, topic)
			}
		}
		if len(commit) == 0 {
			gs.skip(SkipNoOffsets, "no committed offsets on mirrored topics")
			out = append(out, gs)
			continue
		}
		lctx, cancel, err := m.e.gate.leased(ctx)
		var resp kadm.OffsetResponses
		if err == nil {
			resp, err = m.e.dst.adm.CommitOffsets(lctx, g, commit)
		}
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			gs.skip(SkipWriteFailed, "commit on the destination: "+err.Error())
		} else {
			gs.LastSync = now
		}
		sortGroupPartitions(gs.Partitions)
		out = append(out, gs)
	}
	m.setGroups(GroupConsumer, out)
	return nil
}

func sortGroupPartitions(ps []GroupPartition) {
	slices.SortFunc(ps, func(a, b GroupPartition) int {
		if a.Topic != b.Topic {
			return compareStrings(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
}

// setGroups replaces the published groups of one kind, keeping the others;
// the list stays sorted by group (a group id is of one kind only).
func (m *mirror) setGroups(kind GroupKind, gs []GroupSnapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := slices.DeleteFunc(slices.Clone(m.groups), func(g GroupSnapshot) bool { return g.Kind == kind })
	all = append(all, gs...)
	slices.SortStableFunc(all, func(a, b GroupSnapshot) int { return compareStrings(a.Group, b.Group) })
	m.groups = all
}
