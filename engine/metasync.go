package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
)

// metaSyncConfig is the metadata sync of one mirror (DESIGN §6): topic
// discovery and partition growth, topic config sync and ACL sync, every
// interval. The zero value is off.
type metaSyncConfig struct {
	// Include selects the source topics an ad-hoc mirror starts mirroring
	// on its own, matched against whole names; nil: no discovery. Mirrors
	// shared through __mirror_state discover through their topic records
	// instead (see discoverTopics).
	Include *regexp.Regexp

	interval      time.Duration
	topicsExclude []*regexp.Regexp
	propsExclude  []*regexp.Regexp
	acls          []aclRule
	aclErr        error // invalid include rules, reported on every ACL sync

	// state is allocated by SyncMetadata so a fresh configuration starts
	// with a fresh status; the mirror's metaSync goroutine writes it,
	// metaStatus reads it.
	state *metaState
}

// SyncMetadata turns on metadata sync every interval. topicsExclude are RE2
// patterns of topics never discovered (nil: "__.*"); propsExclude are topic
// config names (or RE2 patterns of them) never synced (nil: the defaults of
// mirror.topic.properties.exclude); aclInclude are the rules
// resourceType;resourceName;operation;permissionType;principal of the ACLs
// copied ("*" matches anything, resourceName may be an RE2 pattern, a rule
// of one field is a resourceName pattern). No aclInclude: no ACL sync.
func (c *MirrorConfig) SyncMetadata(interval time.Duration, topicsExclude, propsExclude, aclInclude []string) {
	d := props.DefaultMirrorSettings()
	if topicsExclude == nil {
		topicsExclude = d.TopicsExclude
	}
	if propsExclude == nil {
		propsExclude = d.TopicPropertiesExclude
	}
	rules, err := parseACLRules(aclInclude)
	include := c.MetaSync.Include
	c.MetaSync = metaSyncConfig{
		Include:  include,
		interval: interval, topicsExclude: compileAll(topicsExclude), propsExclude: compileAll(propsExclude),
		acls: rules, aclErr: err, state: &metaState{},
	}
}

// DiscoverTopics makes an ad-hoc mirror start mirroring, at each metadata
// sync, the source topics that include (RE2, whole names) matches and the
// topics exclude does not. It may be called before or after SyncMetadata.
func (c *MirrorConfig) DiscoverTopics(include string) error {
	re, err := regexp.Compile("^(?:" + include + ")$")
	if err != nil {
		return fmt.Errorf("mirror %s: topic include pattern %q: %w", c.Name, include, err)
	}
	c.MetaSync.Include = re
	return nil
}

// MetaSyncKind is the status of one kind of metadata sync.
type MetaSyncKind struct {
	LastSync    time.Time // last run without error; zero: never
	LastError   string    // error of the last run, "" if it succeeded
	LastErrorAt time.Time
	Synced      int // changes made on the destination by the last run
	Skipped     int // items seen and deliberately not copied by the last run
}

// MetaSyncStatus is the metadata sync status of one mirror.
type MetaSyncStatus struct {
	Topics  MetaSyncKind // discovery and partition growth; Synced: topics started or grown
	Configs MetaSyncKind // Synced: config entries set or removed; Skipped: excluded entries
	ACLs    MetaSyncKind // Synced: ACLs created; Skipped: source ACLs not matching the rules
	Deleted []string     // mirrored topics deleted on the source, sorted
	Rounds  int64        // metadata sync rounds run to their end since the mirror started here
}

// metaState holds what the metaSync goroutine learned, for readers.
type metaState struct {
	mu      sync.Mutex
	status  MetaSyncStatus
	deleted map[string]bool
	grown   map[string]bool // shared mirrors: topics with source partitions that have no runner yet
}

// takeGrown reports whether the source topic was seen with partitions this
// instance runs no runner for, and forgets it: the coordinator, which owns
// the partitions' records, starts them.
func (m *mirror) takeGrown(topic string) bool {
	st := m.settings().metaSync.state
	if st == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	grown := st.grown[topic]
	delete(st.grown, topic)
	return grown
}

func (s *metaState) record(kind *MetaSyncKind, now time.Time, synced, skipped int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind.Synced, kind.Skipped = synced, skipped
	if err != nil {
		kind.LastError, kind.LastErrorAt = err.Error(), now
		return
	}
	kind.LastSync, kind.LastError = now, ""
}

// metaStatus returns the mirror's metadata sync status.
func (m *mirror) metaStatus() MetaSyncStatus {
	st := m.settings().metaSync.state
	if st == nil {
		return MetaSyncStatus{}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.status
	out.Deleted = slices.Sorted(func(yield func(string) bool) {
		for t := range st.deleted {
			if !yield(t) {
				return
			}
		}
	})
	return out
}

// deletedTopics returns the mirrored topics found deleted on the source:
// their partitions can never catch up again and should fail, non-retryable.
func (m *mirror) deletedTopics() []string { return m.metaStatus().Deleted }

// metaSync runs the metadata sync every interval until ctx ends.
func (m *mirror) metaSync(ctx context.Context) {
	if cfg := m.settings().metaSync; cfg.interval <= 0 || cfg.state == nil {
		return
	}
	every(ctx, func() time.Duration { return m.settings().metaSync.interval }, func() { m.metaSyncOnce(ctx) })
}

// every runs round once an interval until ctx ends, the first after one
// interval. The interval is read every round, so an --alter changes it
// live; it counts from the end of a round, so a slow round is never
// followed by another at once.
func every(ctx context.Context, interval func() time.Duration, round func()) {
	t := time.NewTimer(interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		round()
		t.Reset(max(interval(), time.Millisecond))
	}
}

// metaSyncOnce runs one round: topics first, so configs and ACLs cover the
// topics discovered in the same round.
func (m *mirror) metaSyncOnce(ctx context.Context) {
	st := m.settings().metaSync.state
	m.refreshGuards(ctx) // needs only the destination: before the source is asked
	meta, err := m.src.metadata(ctx, nil)
	if err == nil && meta.clusterID != m.sourceID {
		err = fmt.Errorf("%w: the source bootstrap reaches cluster %s, the mirror was created against %s", ErrSourceClusterChanged, meta.clusterID, m.sourceID)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		// Nothing is copied from a cluster that is not the mirror's source.
		err = fmt.Errorf("mirror %s metadata sync: %w", m.cfg.Name, err)
		now := m.e.now()
		st.record(&st.status.Topics, now, 0, 0, err)
		st.record(&st.status.Configs, now, 0, 0, err)
		st.record(&st.status.ACLs, now, 0, 0, err)
		if errors.Is(err, ErrSourceClusterChanged) {
			// KIP-1279: synchronization for this mirror stops, in
			// terminal FAILED, whether or not the data path is busy
			// enough to notice by itself.
			m.failSourceChanged(err)
			return
		}
		m.e.emit(LevelWarn, m.cfg.Name, "", -1, err.Error())
		return
	}
	n, err := m.syncTopics(ctx, meta)
	m.recordKind(ctx, &st.status.Topics, "topic sync", n, 0, err)
	for _, t := range m.deletedTopics() {
		if m.topicStopped(t) {
			continue // failed over: what became of the source topic no longer matters
		}
		for _, r := range m.runnersOf(t) {
			r.Inject(r.Failuref("%w: %s no longer exists on the source cluster %s; its partitions cannot be mirrored any more", ErrSourceTopicDeleted, t, m.sourceID))
		}
	}

	recreated := m.failRecreated(meta)
	topics := slices.DeleteFunc(m.notStopped(m.liveTopics()), func(t string) bool { return slices.Contains(recreated, t) })
	n, skipped, err := m.syncConfigs(ctx, topics)
	m.recordKind(ctx, &st.status.Configs, "topic config sync", n, skipped, err)

	if len(m.settings().metaSync.acls) > 0 || m.settings().metaSync.aclErr != nil {
		n, skipped, err := m.syncACLs(ctx, topics)
		m.recordKind(ctx, &st.status.ACLs, "ACL sync", n, skipped, err)
	}
	st.mu.Lock()
	st.status.Rounds++
	st.mu.Unlock()
}

// checkSourceCluster asks the source for its cluster id alone (a metadata
// request naming no topic) and returns ErrSourceClusterChanged when it is
// not the one the mirror was created against.
func (m *mirror) checkSourceCluster(ctx context.Context) error {
	meta, err := m.src.metadata(ctx, []string{})
	if err != nil {
		return err
	}
	if meta.clusterID != m.sourceID {
		return fmt.Errorf("%w: the source bootstrap reaches cluster %s, the mirror was created against %s", ErrSourceClusterChanged, meta.clusterID, m.sourceID)
	}
	return nil
}

// failSourceChanged fails every partition of the mirror not failed over,
// non-retryable (source_cluster_changed): PAUSED and idle ones too. A
// stopped topic is the destination's and stays as it is.
func (m *mirror) failSourceChanged(err error) {
	n := 0
	for _, t := range m.notStopped(m.topicList()) {
		for _, r := range m.runnersOf(t) {
			if r.Stats().WaitsForRecover() {
				continue // already waiting for recover
			}
			r.Inject(r.Failure(err))
			n++
		}
	}
	if n > 0 {
		m.e.emit(LevelError, m.cfg.Name, "", -1, fmt.Sprintf("%v: %d partitions FAILED until recovered", err, n))
	}
}

// failRecreated fails the partitions of mirrored topics whose source topic
// now has another id than the one mirrored, and returns those topics:
// nothing of the new source topic (configs, ACLs) is copied to the
// destination topic of the old one.
func (m *mirror) failRecreated(meta clusterMeta) []string {
	var out []string
	for _, t := range m.topicList() {
		if !m.recreatedIn(meta, t) || m.topicStopped(t) {
			continue
		}
		out = append(out, t)
		was, now := m.sourceTopicID(t), meta.topics[t].id
		for _, r := range m.runnersOf(t) {
			r.Inject(r.Failure(recreatedError(t, was, now)))
		}
	}
	return out
}

// recreatedIn reports whether the source listing shows topic with another
// id than the one its partitions were mirrored from.
func (m *mirror) recreatedIn(meta clusterMeta, topic string) bool {
	tm, ok := meta.topics[topic]
	was := m.sourceTopicID(topic)
	return ok && tm.err == nil && tm.id != ([16]byte{}) && was != ([16]byte{}) && tm.id != was
}

func (m *mirror) recordKind(ctx context.Context, kind *MetaSyncKind, what string, synced, skipped int, err error) {
	if err != nil && ctx.Err() != nil {
		return // shutting down: not a sync failure
	}
	m.settings().metaSync.state.record(kind, m.e.now(), synced, skipped, err)
	if err != nil {
		m.e.emit(LevelWarn, m.cfg.Name, "", -1, fmt.Sprintf("mirror %s %s: %v", m.cfg.Name, what, err))
	}
}

// liveTopics are the mirrored topics not deleted on the source.
func (m *mirror) liveTopics() []string {
	deleted := m.deletedTopics()
	return slices.DeleteFunc(m.topicList(), func(t string) bool { return slices.Contains(deleted, t) })
}

// adHoc reports whether the mirror's runners were started directly rather
// than from __mirror_state records: only then may the metadata sync start
// runners itself; shared mirrors start them from their records.
func (m *mirror) adHoc() bool {
	return !slices.ContainsFunc(m.runners(), func(r *runner) bool { return r.Persists() })
}

// adHocSetup starts a partition of an ad-hoc mirror from nothing, as
// StartMirror does.
func (m *mirror) adHocSetup(int32) runnerInit {
	return runnerInit{Status: partition.Status{Config: m.cfg.retryConfig()}, Events: []partition.Event{partition.Start{}}, LastOffset: -1, LastEpoch: -1}
}

// syncTopics notices deleted source topics and, for ad-hoc mirrors, starts
// runners for grown partitions and discovered topics. It returns the number
// of topics started or grown.
func (m *mirror) syncTopics(ctx context.Context, meta clusterMeta) (int, error) {
	st := m.settings().metaSync.state
	var errs []error
	mirrored := m.topicList()
	for _, t := range mirrored {
		// A failed-over topic is left alone whatever the source does.
		if m.topicStopped(t) || !m.sourceTopicGone(ctx, meta, t) {
			continue
		}
		st.mu.Lock()
		known := st.deleted[t]
		if st.deleted == nil {
			st.deleted = map[string]bool{}
		}
		st.deleted[t] = true
		st.mu.Unlock()
		if !known {
			m.e.emit(LevelError, m.cfg.Name, t, -1, fmt.Sprintf("source topic %s was deleted: its partitions cannot be mirrored any more", t))
		}
	}
	deleted := m.deletedTopics()
	if !m.adHoc() {
		// Shared mirrors start partitions from their records, in the
		// coordinator's loop: note the grown topics for it.
		st.mu.Lock()
		for _, t := range mirrored {
			if tm, ok := meta.topics[t]; ok && tm.err == nil && !slices.Contains(deleted, t) && len(tm.partitions) > len(m.runnersOf(t)) && !m.topicStopped(t) && !m.recreatedIn(meta, t) {
				if st.grown == nil {
					st.grown = map[string]bool{}
				}
				st.grown[t] = true
			}
		}
		st.mu.Unlock()
		return 0, errors.Join(errs...)
	}
	changed := 0
	// Until StartMirror has started every configured topic, one of them
	// may be half-way through addTopic; growing it here would race that
	// call for the same partitions.
	starting := slices.ContainsFunc(m.cfg.Topics, func(t string) bool { return !slices.Contains(mirrored, t) })
	for _, t := range mirrored {
		tm, ok := meta.topics[t]
		if !ok || starting || slices.Contains(deleted, t) || len(tm.partitions) <= len(m.runnersOf(t)) || m.topicStopped(t) || m.recreatedIn(meta, t) {
			continue // a failed-over topic does not grow with its old source, nor one with a new source topic
		}
		// addTopic grows the destination topic (ensureTopics) and starts
		// runners only for the partitions that have none.
		if err := m.addTopic(ctx, t, m.adHocSetup, nil, nil, nil); err != nil {
			errs = append(errs, fmt.Errorf("grow %s: %w", t, err))
			continue
		}
		changed++
		m.e.emit(LevelInfo, m.cfg.Name, t, -1, fmt.Sprintf("source topic %s grew to %d partitions: mirroring the new ones", t, len(tm.partitions)))
	}
	if inc := m.settings().metaSync.Include; inc != nil {
		known := slices.Concat(mirrored, m.cfg.Topics, deleted)
		for _, t := range matchNewTopics(meta, inc, m.settings().metaSync.topicsExclude, known) {
			if err := m.addTopic(ctx, t, m.adHocSetup, nil, nil, nil); err != nil {
				errs = append(errs, fmt.Errorf("start discovered topic %s: %w", t, err))
				continue
			}
			changed++
			m.e.emit(LevelInfo, m.cfg.Name, t, -1, fmt.Sprintf("discovered source topic %s: mirroring it", t))
		}
	}
	return changed, errors.Join(errs...)
}

// sourceTopicGone confirms with a request of its own that a topic missing
// from the full listing is unknown to the source: a broker answering from a
// lagging metadata cache must not fail a topic.
func (m *mirror) sourceTopicGone(ctx context.Context, all clusterMeta, topic string) bool {
	if tm, ok := all.topics[topic]; ok && !errors.Is(tm.err, kerr.UnknownTopicOrPartition) {
		return false
	}
	one, err := m.src.metadata(ctx, []string{topic})
	if err != nil {
		return false
	}
	tm, ok := one.topics[topic]
	return !ok || errors.Is(tm.err, kerr.UnknownTopicOrPartition)
}

// discoverTopics lists the source topics that include matches (as a whole
// name), that no exclude pattern matches and that are not in known, sorted.
// The coordinator calls it for a topic record's pattern and writes a topic
// record for each answer.
func discoverTopics(ctx context.Context, src *cluster, include *regexp.Regexp, exclude []*regexp.Regexp, known []string) ([]string, error) {
	meta, err := src.metadata(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("discover topics: %w", err)
	}
	return matchNewTopics(meta, include, exclude, known), nil
}

func matchNewTopics(meta clusterMeta, include *regexp.Regexp, exclude []*regexp.Regexp, known []string) []string {
	if include == nil {
		return nil
	}
	// Anchoring again is harmless for anchored patterns and makes a
	// caller's unanchored one match whole names, as --topics does.
	whole := regexp.MustCompile("^(?:" + include.String() + ")$")
	var out []string
	for t, tm := range meta.topics {
		if tm.err != nil || !whole.MatchString(t) || slices.Contains(known, t) ||
			slices.ContainsFunc(exclude, func(re *regexp.Regexp) bool { return re.MatchString(t) }) {
			continue
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
