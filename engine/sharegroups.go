package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupKind says what a synced group is, and so what its offsets mean.
type GroupKind int8

const (
	// GroupConsumer is a consumer group: the offsets are committed offsets.
	GroupConsumer GroupKind = iota
	// GroupShare is a share group (KIP-932): the offsets are share-partition
	// start offsets, below which every record is delivered and acknowledged.
	GroupShare
)

// String returns the kind as Kafka's group type names it.
func (k GroupKind) String() string {
	switch k {
	case GroupConsumer:
		return "consumer"
	case GroupShare:
		return "share"
	}
	return "consumer"
}

// The requests the share-group sync sends to each cluster. A cluster whose
// brokers do not all advertise them has no share groups to read or write
// (Kafka before 4.1, or share groups not enabled).
var (
	shareSourceKeys      = []kmsg.Key{kmsg.ListGroups, kmsg.DescribeShareGroupOffsets}
	shareDestinationKeys = []kmsg.Key{kmsg.ShareGroupDescribe, kmsg.DescribeShareGroupOffsets, kmsg.AlterShareGroupOffsets}
)

// shareUnsupported says why a cluster cannot take part in the share-group
// sync, "" if it can. ListGroups needs v5 for the group type filter.
func shareUnsupported(ctx context.Context, c *cluster, keys []kmsg.Key) (string, error) {
	vs, err := c.adm.ApiVersions(ctx)
	if err != nil {
		return "", fmt.Errorf("%s api versions: %w", c.name, err)
	}
	answered := false
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			continue
		}
		answered = true
		for _, k := range keys {
			_, hi, ok := v.KeyVersions(k.Int16())
			if !ok || (k == kmsg.ListGroups && hi < 5) {
				return fmt.Sprintf("the %s cluster does not support share groups (broker %d lacks %s)", c.name, v.NodeID, k.Name()), nil
			}
		}
	}
	if !answered {
		return "", fmt.Errorf("%s api versions: no broker answered", c.name)
	}
	return "", nil
}

// errShareUnsupported marks a cluster answering UNSUPPORTED_VERSION to a
// share-group request it advertises (share groups turned off on the broker).
type errShareUnsupported struct{ cluster, request string }

func (e errShareUnsupported) Error() string {
	return fmt.Sprintf("the %s cluster answers UNSUPPORTED_VERSION to %s: share groups are not enabled there", e.cluster, e.request)
}

// unsupported turns UNSUPPORTED_VERSION from a share-group request into
// errShareUnsupported, and wraps any other error with the request.
func unsupported(err error, c *cluster, request string) error {
	if errors.Is(err, kerr.UnsupportedVersion) {
		return errShareUnsupported{c.name, request}
	}
	return fmt.Errorf("%s %s: %w", c.name, request, err)
}

// syncShareGroupsOnce copies the share-partition start offsets of the
// source's share groups matching the group filters to the destination, by
// the rules of the consumer-group sync: only the given (mirrored, not
// stopped) topics, clamped into the destination log, never a group with
// members on the destination. A cluster without share groups is not an
// error: the sync records why it was skipped and the mirror goes on.
func (m *mirror) syncShareGroupsOnce(ctx context.Context, topics []string) error {
	out, skip, err := m.shareGroups(ctx, topics)
	if errors.As(err, new(errShareUnsupported)) {
		out, skip, err = nil, err.Error(), nil
	}
	if err != nil {
		return err
	}
	m.setGroups(GroupShare, out)
	m.mu.Lock()
	m.shareSkip = skip
	m.mu.Unlock()
	return nil
}

func (m *mirror) shareGroups(ctx context.Context, topics []string) ([]GroupSnapshot, string, error) {
	src, dst := m.src, m.e.dst
	if reason, err := shareUnsupported(ctx, src, shareSourceKeys); reason != "" || err != nil {
		return nil, reason, err
	}
	if reason, err := shareUnsupported(ctx, dst, shareDestinationKeys); reason != "" || err != nil {
		return nil, reason, err
	}
	listed, err := src.adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return nil, "", unsupported(err, src, "ListGroups")
	}
	var groups []string
	for _, g := range listed.Sorted() {
		if g.GroupType == "share" && m.settings().groupSync.wants(g.Group) {
			groups = append(groups, g.Group)
		}
	}
	if len(groups) == 0 || len(topics) == 0 {
		return nil, "", nil
	}
	srcOffs, err := src.adm.DescribeShareGroupOffsets(ctx, groups...)
	if err != nil {
		return nil, "", unsupported(err, src, "DescribeShareGroupOffsets")
	}
	dstDesc, err := dst.adm.DescribeShareGroups(ctx, groups...)
	if err != nil {
		return nil, "", unsupported(err, dst, "ShareGroupDescribe")
	}
	dstOffs, err := dst.adm.DescribeShareGroupOffsets(ctx, groups...)
	if err != nil {
		return nil, "", unsupported(err, dst, "DescribeShareGroupOffsets")
	}
	for _, g := range groups { // brokers with share groups off answer per group
		switch {
		case errors.Is(srcOffs[g].Err, kerr.UnsupportedVersion):
			return nil, "", unsupported(srcOffs[g].Err, src, "DescribeShareGroupOffsets")
		case errors.Is(dstDesc[g].Err, kerr.UnsupportedVersion):
			return nil, "", unsupported(dstDesc[g].Err, dst, "ShareGroupDescribe")
		case errors.Is(dstOffs[g].Err, kerr.UnsupportedVersion):
			return nil, "", unsupported(dstOffs[g].Err, dst, "DescribeShareGroupOffsets")
		}
	}
	starts, err := dst.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, "", fmt.Errorf("destination log starts: %w", err)
	}
	ends, err := dst.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, "", fmt.Errorf("destination log ends: %w", err)
	}
	var out []GroupSnapshot
	for _, g := range groups {
		out = append(out, m.syncShareGroup(ctx, g, topics, srcOffs[g], dstOffs[g], dstDesc[g], starts, ends))
	}
	return out, "", nil
}

// syncShareGroup writes one share group's start offsets on the destination
// where they differ from what the sync wants there. Writing only the
// differences matters: AlterShareGroupOffsets resets the partition's
// delivery state on the destination.
func (m *mirror) syncShareGroup(ctx context.Context, g string, topics []string, srcOffs, dstOffs kadm.DescribedShareGroupOffsets,
	dstDesc kadm.DescribedShareGroup, starts, ends kadm.ListedOffsets,
) GroupSnapshot {
	gs := GroupSnapshot{Group: g, Kind: GroupShare}
	switch {
	case srcOffs.Err != nil:
		gs.skip(SkipSourceUnreadable, "describe source start offsets: "+srcOffs.Err.Error())
		return gs
	case dstDesc.Err != nil && !errors.Is(dstDesc.Err, kerr.GroupIDNotFound):
		gs.skip(SkipDestinationUnreadable, "describe on the destination: "+dstDesc.Err.Error())
		return gs
	case len(dstDesc.Members) > 0:
		gs.skip(SkipActive, fmt.Sprintf("active on the destination (%d members): it consumes there already", len(dstDesc.Members)))
		return gs
	}
	var alter kadm.Offsets
	for topic, ps := range srcOffs.Offsets {
		if !slices.Contains(topics, topic) {
			continue
		}
		for p, o := range ps {
			if o.Err != nil || o.StartOffset < 0 {
				continue // no share state for the partition yet
			}
			s, sok := starts.Lookup(topic, p)
			e, eok := ends.Lookup(topic, p)
			if !sok || !eok || s.Err != nil || e.Err != nil {
				continue // not on the destination yet
			}
			at := max(s.Offset, min(o.StartOffset, e.Offset))
			gs.Partitions = append(gs.Partitions, GroupPartition{Topic: topic, Partition: p, Source: o.StartOffset, Destination: at})
			if cur, ok := dstOffs.Offsets[topic][p]; !ok || cur.Err != nil || cur.StartOffset != at {
				alter.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
			}
		}
	}
	sortGroupPartitions(gs.Partitions)
	if len(gs.Partitions) == 0 {
		gs.skip(SkipNoOffsets, "no share-partition state on mirrored topics")
		return gs
	}
	for topic := range alter {
		if m.topicStopped(topic) { // a stop landed since the round listed the topics
			delete(alter, topic)
		}
	}
	if len(alter) > 0 {
		lctx, cancel, err := m.e.gate.leased(ctx)
		var resp kadm.AlterShareGroupOffsetsResponses
		if err == nil {
			resp, err = m.e.dst.adm.AlterShareGroupOffsets(lctx, g, alter)
		}
		cancel()
		if err == nil {
			err = resp.Error()
		}
		switch {
		case errors.Is(err, kerr.NonEmptyGroup):
			gs.skip(SkipActive, "active on the destination: it consumes there already")
			return gs
		case err != nil:
			gs.skip(SkipWriteFailed, "alter start offsets on the destination: "+err.Error())
			return gs
		}
	}
	gs.LastSync = m.e.now()
	return gs
}
