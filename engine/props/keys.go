package props

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// kipNames maps the spellings kmirror used before KIP-1279 named these
// settings to the KIP's names (as the proposal's reference implementation,
// ClusterMirrorConfig, spells a mirror's settings: topics.include,
// topics.exclude and the fetch.* keys without a mirror. prefix).
// __mirror_state keeps the old spellings, so instances of an older build
// sharing the destination still read every definition; files may use
// either, and the old one draws a warning.
var kipNames = map[string]string{
	KeyNumFetchers:            "mirror.num.replica.fetchers",
	KeyTopicPropertiesExclude: "topic.properties.exclude",
	KeyGroupsInclude:          "groups.include",
	KeyGroupsExclude:          "groups.exclude",
	KeyACLInclude:             "acls.include",
	KeyTopicsInclude:          "topics.include",
	KeyTopicsExclude:          "topics.exclude",
	KeyFetchMaxBytes:          "fetch.max.bytes",
	KeyFetchWaitMax:           "fetch.wait.max.ms",
	KeyFetchMinBytes:          "fetch.min.bytes",
	KeyFetchResponseMaxBytes:  "fetch.response.max.bytes",
}

// storedNames is kipNames inverted.
var storedNames = func() map[string]string {
	m := make(map[string]string, len(kipNames))
	for old, kip := range kipNames {
		m[kip] = old
	}
	return m
}()

// Canonical returns the key under which a setting is stored and looked up,
// whichever spelling a file used.
func Canonical(key string) string {
	if old, ok := storedNames[key]; ok {
		return old
	}
	return key
}

// PrimaryName is the name kmirror shows for a setting: the KIP's.
func PrimaryName(key string) string {
	if kip, ok := kipNames[key]; ok {
		return kip
	}
	return key
}

// IsMirrorSetting reports whether key (any spelling) belongs to the mirror
// itself rather than to its source client.
func IsMirrorSetting(key string) bool {
	return strings.HasPrefix(Canonical(key), "mirror.")
}

// clientKeys are the Kafka client settings kmirror reads, for the mirror's
// source (in --mirror-config) and for the destination (in --command-config).
var clientKeys = keyChecks(clientSettings)

// suggest is the "did you mean" of an unknown key: the closest of
// candidates within three edits, shown under its primary name.
func suggest(key string, candidates map[string]check) string {
	names := make([]string, 0, len(candidates)+len(kipNames))
	for k := range candidates {
		names = append(names, k, PrimaryName(k))
	}
	slices.Sort(names)
	best, dist := "", 4
	for _, k := range slices.Compact(names) {
		if d := levenshtein(key, k); d < dist {
			best, dist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown setting %q (did you mean %q?)", key, PrimaryName(Canonical(best)))
	}
	return fmt.Sprintf("unknown setting %q (ignored)", key)
}

// aclTypes are the resource types an acls.include rule may name.
var aclTypes = []string{"ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

// aclRules checks acls.include as KIP-1279 writes it: "*" (every ACL),
// TYPE;pattern items ("TOPIC;orders-.*,GROUP;app-.*"), bare name patterns,
// or the full resourceType;resourceName;operation;permissionType;principal.
func aclRules(v string) error {
	for _, r := range SplitList(v) {
		f := strings.Split(r, ";")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		switch len(f) {
		case 1:
			f = []string{"*", f[0]}
		case 2, 5:
		default:
			return fmt.Errorf("rule %q: want *, TYPE;pattern or resourceType;resourceName;operation;permissionType;principal", r)
		}
		if f[0] != "*" && !slices.ContainsFunc(aclTypes, func(t string) bool { return strings.EqualFold(t, f[0]) }) {
			return fmt.Errorf("rule %q: resource type %q is not one of %s", r, f[0], strings.Join(aclTypes, ", "))
		}
		if f[1] != "*" && f[1] != "" {
			if _, err := regexp.Compile(f[1]); err != nil {
				return fmt.Errorf("rule %q: pattern: %w", r, err)
			}
		}
	}
	return nil
}
