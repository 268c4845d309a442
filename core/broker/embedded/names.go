package embedded

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/core/internal/topicname"
)

// topicName is a parsed, normalised topic name.
type topicName struct {
	full       string // persistent://tenant/ns/local
	persistent bool
	namespace  string // tenant/ns
	base       string // full name without -partition-N
	partition  int    // -1 when not a partition
}

// parseTopic normalises a topic name: "x" and "tenant/ns/x" are persistent
// topics in public/default and tenant/ns respectively. A name with four or more
// parts is a legacy cluster-scoped one, tenant/cluster/ns/local (Pulsar's v1
// WebSocket paths use them), as Pulsar's clients split it: the local name is
// everything after the third '/'.
func parseTopic(name string) (topicName, error) {
	tn := topicName{partition: -1}
	domain, rest, ok := strings.Cut(name, "://")
	if !ok {
		domain, rest = "persistent", name
	}
	switch domain {
	case "persistent":
		tn.persistent = true
	case "non-persistent":
	default:
		return topicName{}, fmt.Errorf("invalid topic name %q: unknown domain %q", name, domain)
	}
	parts := strings.SplitN(rest, "/", 4)
	switch len(parts) {
	case 1:
		parts = []string{"public", "default", parts[0]}
	case 3, 4:
	default:
		return topicName{}, fmt.Errorf("invalid topic name %q", name)
	}
	// Pulsar's names of tenants and namespaces have no white space; a topic's local name may.
	for i, p := range parts {
		if p == "" || i < len(parts)-1 && strings.ContainsAny(p, " \t\r\n") {
			return topicName{}, fmt.Errorf("invalid topic name %q", name)
		}
	}
	local := parts[len(parts)-1]
	tn.namespace = strings.Join(parts[:len(parts)-1], "/")
	tn.full = domain + "://" + tn.namespace + "/" + local
	tn.base = tn.full
	// A partition has a partitioned topic's name before its suffix.
	if n := topicname.PartitionIndex(local); n >= 0 {
		if base := topicname.Base(local); base != "" {
			tn.partition = n
			tn.base = domain + "://" + tn.namespace + "/" + base
		}
	}
	return tn, nil
}

func partitionName(base string, i int) string {
	return base + topicname.PartitionSuffix + strconv.Itoa(i)
}
