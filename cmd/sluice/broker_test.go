package main

import (
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func TestParseBrokerFlags(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args    []string
		want    embedded.Config
		wantErr bool
	}{
		"defaults": {nil, embedded.Config{StoreLimit: 256 << 20}, false},
		"sizes": {[]string{"--store-limit", "16MiB", "--retention-size", "1MB", "--retention-time", "10m"},
			embedded.Config{StoreLimit: 16 << 20, RetentionSize: 1e6, RetentionTime: 10 * time.Minute}, false},
		"retention-bytes as a size":   {[]string{"--retention-bytes", "64MiB"}, embedded.Config{StoreLimit: 64 << 20}, false},
		"retention-bytes as a number": {[]string{"--retention-bytes", "4294967296"}, embedded.Config{StoreLimit: 4 << 30}, false},
		"quotas and inactive topics": {[]string{"--backlog-quota", "1MiB", "--namespace-backlog-quota", "4MiB",
			"--backlog-quota-policy", "consumer_backlog_eviction", "--keep-inactive-topics", "--inactive-topic-delete-after", "5m",
			"--inactive-topic-mode", "delete_when_subscriptions_caught_up", "--subscription-expiration", "1h",
			"--max-topics", "100", "--max-topics-per-namespace", "10"},
			embedded.Config{StoreLimit: 256 << 20, BacklogQuotaLimit: 1 << 20, NamespaceBacklogQuotaLimit: 4 << 20,
				BacklogQuotaPolicy: "consumer_backlog_eviction", KeepInactiveTopics: true, InactiveTopicDeleteAfter: 5 * time.Minute,
				InactiveTopicMode: "delete_when_subscriptions_caught_up", SubscriptionExpiration: time.Hour,
				MaxTopics: 100, MaxTopicsPerNamespace: 10}, false},
		"bad size":      {[]string{"--store-limit", "lots"}, embedded.Config{}, true},
		"negative size": {[]string{"--store-limit", "-1"}, embedded.Config{}, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, _, err := parseBrokerFlags(tc.args, io.Discard)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got.Addr, got.AdminAddr = "", ""
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
