package bench

// The `sluice serve` configuration the benchmarks write, as Go values marshalled to YAML.
// Only keys that every sluice binary since the first benchmarks accepts appear here, so an
// older binary can run the same configurations (-compare, -serve-bin).

type serveConfig struct {
	Listen      string         `yaml:"listen"`
	AdminListen string         `yaml:"admin_listen"`
	AdminPprof  bool           `yaml:"admin_pprof,omitempty"`
	TLS         *tlsFiles      `yaml:"tls,omitempty"`
	Limits      *limitsConfig  `yaml:"limits,omitempty"`
	Broker      *brokerConfig  `yaml:"broker,omitempty"`
	Memory      *memoryConfig  `yaml:"memory,omitempty"`
	Plugins     []pluginConfig `yaml:"plugins,omitempty"`
	Routes      []routeConfig  `yaml:"routes,omitempty"`
}

// tlsFiles is the tls section: the listener's certificate and key.
type tlsFiles struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// brokerConfig is the broker section: the token, for a Pulsar with token authentication (the
// URL is given with --broker), and the embedded broker's topic bound.
type brokerConfig struct {
	AuthToken string          `yaml:"auth_token,omitempty"`
	Embedded  *embeddedConfig `yaml:"embedded,omitempty"`
}

// embeddedConfig is the embedded broker's section: only the topic bound of a namespace, which
// the idle connections benchmark raises past its default when each connection has its own topic.
type embeddedConfig struct {
	MaxTopicsPerNamespace int `yaml:"max_topics_per_namespace"`
}

// memoryConfig holds sizes as the configuration spells them ("16MiB"; "0" is unbounded);
// an empty string leaves the key out (its default).
type memoryConfig struct {
	ProducerLimit string `yaml:"producer_limit,omitempty"`
	ConsumerLimit string `yaml:"consumer_limit,omitempty"`
	SessionLimit  string `yaml:"session_limit,omitempty"`
}

// limitsConfig is the limits section: only the connection bound, which the idle connections
// benchmark raises past its default.
type limitsConfig struct {
	MaxConnections int `yaml:"max_connections"`
}

type pluginConfig struct {
	Name string `yaml:"name"`
	Path string `yaml:"path"`
}

type routeConfig struct {
	Name         string                 `yaml:"name"`
	Match        string                 `yaml:"match"`
	Strategy     strategyConfig         `yaml:"strategy"`
	Fallback     string                 `yaml:"fallback,omitempty"`
	OnFull       string                 `yaml:"on_full,omitempty"`
	ClientParams map[string]clientParam `yaml:"client_params,omitempty"`
	SlowConsumer *slowConsumer          `yaml:"slow_consumer,omitempty"`
	// Batching is routes[].batching.
	Batching string `yaml:"batching,omitempty"`
}

type strategyConfig struct {
	Plugin string         `yaml:"plugin,omitempty"`
	Name   string         `yaml:"name"`
	Params map[string]any `yaml:"params,omitempty"`
}

type clientParam struct {
	Default int `yaml:"default"`
	Max     int `yaml:"max"`
}

type slowConsumer struct {
	Action string `yaml:"action"`
}

// benchRoute is a route matching every WebSocket path.
func benchRoute(strategy strategyConfig, onFull string) routeConfig {
	return routeConfig{Name: "bench", Match: "/ws/**", Strategy: strategy, OnFull: onFull}
}
