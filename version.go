package main

import "runtime/debug"

// version is kmirror's release, set at build time with
// -ldflags "-X main.version=v1.2.3"; "dev" otherwise.
var version = "dev"

// versionString is the release and, when the binary was built from a git
// checkout, the commit: instances report it in their heartbeats, so an
// operator can see which build runs where during a rolling upgrade.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return version
	}
	return version + " (" + rev + dirty + ")"
}
