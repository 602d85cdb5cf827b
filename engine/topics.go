package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/engine/props"
)

// regexChars mark a --topics or --exclude item as an RE2 pattern; any other
// item is a topic name. A dot alone does not: it is legal in topic names and
// "orders.eu" means that topic.
const regexChars = `*+?()[]{}|^$\`

// TopicSelector is the --topics argument as KIP-1279 writes it: a comma
// list whose items are topic names or RE2 regexes matching whole names
// ("payments,orders-.*").
type TopicSelector struct {
	names []string
	re    *regexp.Regexp // the regex items as one alternation; nil when there are none
	raw   string
}

// ParseTopics parses --topics.
func ParseTopics(arg string) (TopicSelector, error) {
	sel := TopicSelector{raw: arg}
	names, re, err := parseList("--topics", arg)
	if err != nil {
		return sel, err
	}
	sel.names, sel.re = names, re
	return sel, nil
}

// ParseExclude parses --exclude, a comma list of names or regexes like
// --topics, into one regex matching whole names.
func ParseExclude(arg string) (*regexp.Regexp, error) {
	names, re, err := parseList("--exclude", arg)
	if err != nil {
		return nil, err
	}
	alts := make([]string, 0, len(names)+1)
	for _, n := range names {
		alts = append(alts, regexp.QuoteMeta(n))
	}
	if re != nil {
		alts = append(alts, re.String())
	}
	return regexp.Compile("^(?:" + strings.Join(alts, "|") + ")$")
}

// parseList splits a comma list into names and one whole-name regex of its
// pattern items. A comma inside (), [] or {} belongs to the pattern.
func parseList(flag, arg string) ([]string, *regexp.Regexp, error) {
	items := props.SplitList(arg)
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("%s is empty", flag)
	}
	var names, pats []string
	for _, it := range items {
		if !strings.ContainsAny(it, regexChars) {
			if !slices.Contains(names, it) {
				names = append(names, it)
			}
			continue
		}
		if _, err := regexp.Compile(it); err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", flag, it, err)
		}
		pats = append(pats, "(?:"+it+")")
	}
	if len(pats) == 0 {
		return names, nil, nil
	}
	re, err := regexp.Compile("^(?:" + strings.Join(pats, "|") + ")$")
	if err != nil {
		return nil, nil, fmt.Errorf("%s %q: %w", flag, arg, err)
	}
	return names, re, nil
}

// Match reports whether topic is selected.
func (s TopicSelector) Match(topic string) bool {
	return slices.Contains(s.names, topic) || (s.re != nil && s.re.MatchString(topic))
}

// HasPatterns reports whether the selector holds regex items: those match
// topics created later too.
func (s TopicSelector) HasPatterns() bool { return s.re != nil }

// wholeRegexp matches what the selector matches, names included: discovery
// of a configured include list starts a named topic too once it appears.
func (s TopicSelector) wholeRegexp() *regexp.Regexp {
	alts := make([]string, 0, len(s.names)+1)
	for _, n := range s.names {
		alts = append(alts, regexp.QuoteMeta(n))
	}
	if s.re != nil {
		alts = append(alts, s.re.String())
	}
	return regexp.MustCompile("^(?:" + strings.Join(alts, "|") + ")$")
}

// String is the selector as the operator wrote it.
func (s TopicSelector) String() string { return s.raw }
