package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mirroringConfigs are the destination topic settings byte-for-byte
// mirroring needs (ensureTopics sets them): never copied from the source.
var mirroringConfigs = []string{"compression.type", "message.timestamp.type"}

// topicOverrides are the configs set on the topic itself. Defaults and
// broker-level values describe the cluster, not the topic: copying them
// would pin the destination to the source's broker settings.
func topicOverrides(rc kadm.ResourceConfig) map[string]string {
	out := map[string]string{}
	for _, c := range rc.Configs {
		switch c.Source {
		case kmsg.ConfigSourceDefaultConfig, kmsg.ConfigSourceStaticBrokerConfig,
			kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDynamicBrokerConfig,
			kmsg.ConfigSourceDynamicBrokerLoggerConfig:
			continue
		}
		if c.Sensitive || c.Value == nil {
			continue // a sensitive value is not readable: nothing to copy
		}
		out[c.Key] = *c.Value
	}
	return out
}

func (c *metaSyncConfig) propExcluded(key string) bool {
	return slices.Contains(mirroringConfigs, key) ||
		slices.ContainsFunc(c.propsExclude, func(re *regexp.Regexp) bool { return re.MatchString(key) })
}

// configOps are the incremental changes that make the destination topic's
// overrides those of the source, excluded keys aside. skipped counts the
// source overrides not copied.
func (c *metaSyncConfig) configOps(src, dst map[string]string) (ops []kadm.AlterConfig, skipped int) {
	for _, k := range sortedKeys(src) {
		v := src[k]
		if c.propExcluded(k) {
			skipped++
			continue
		}
		if k == "max.message.bytes" {
			// Filler and mirrored batches must fit whatever the source
			// accepted; ensureTopics keeps at least 1 MiB for that.
			if n, err := strconv.Atoi(v); err == nil && n < 1<<20 {
				v = strconv.Itoa(1 << 20)
			}
		}
		if cur, ok := dst[k]; ok && cur == v {
			continue
		}
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
	}
	// An override removed on the source goes back to the destination's
	// default, unless the key is excluded (the operator owns it there).
	for _, k := range sortedKeys(dst) {
		if _, ok := src[k]; ok || c.propExcluded(k) || k == "max.message.bytes" {
			continue
		}
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return ops, skipped
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// syncConfigs copies the source topics' config overrides to their
// destination topics. It returns the entries changed and skipped.
func (m *mirror) syncConfigs(ctx context.Context, topics []string) (changed, skipped int, err error) {
	if len(topics) == 0 {
		return 0, 0, nil
	}
	srcCfgs, err := m.src.adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return 0, 0, fmt.Errorf("describe source topic configs: %w", err)
	}
	dstCfgs, err := m.e.dst.adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return 0, 0, fmt.Errorf("describe destination topic configs: %w", err)
	}
	var errs []error
	for _, t := range topics {
		src, err := srcCfgs.On(t, nil)
		if err == nil {
			err = src.Err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("source topic %s configs: %w", t, err))
			continue
		}
		dst, err := dstCfgs.On(t, nil)
		if err == nil {
			err = dst.Err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("destination topic %s configs: %w", t, err))
			continue
		}
		ops, n := m.settings().metaSync.configOps(topicOverrides(src), topicOverrides(dst))
		skipped += n
		// A stop may have landed since the round started.
		if len(ops) == 0 || m.topicStopped(t) {
			continue
		}
		lctx, cancel, err := m.e.gate.leased(ctx)
		var resp kadm.AlterConfigsResponses
		if err == nil {
			resp, err = m.e.dst.adm.AlterTopicConfigs(lctx, ops, t)
		}
		cancel()
		if err == nil {
			for _, r := range resp {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("alter destination topic %s configs: %w", t, err))
			continue
		}
		changed += len(ops)
		names := make([]string, len(ops))
		for i, o := range ops {
			names[i] = o.Name
		}
		m.e.emit(LevelInfo, m.cfg.Name, t, -1, fmt.Sprintf("synced %d configs of topic %s from the source: %v", len(ops), t, names))
	}
	return changed, skipped, errors.Join(errs...)
}
