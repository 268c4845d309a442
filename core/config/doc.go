// Package config loads, decodes, validates and watches Sluice's
// configuration. docs/configuration.md is the user's guide; its key
// reference and the descriptions `sluice config` prints are generated from
// the doc comments of the Config fields (see [Keys]).
//
// The schema is the typed [Config]; keys are snake_case and every field
// documents its zero value. [Load] layers, with koanf, the defaults, YAML
// files (in order), SLUICE_ environment variables and explicit overrides
// (flags), then decodes strictly: an unknown key (a typo such as
// hihg_watermark) or a wrong type is an error that names its key path. It
// then applies defaults and calls [Config.Validate], which reports every
// problem at once, each prefixed with its path:
//
//	routes[1].on_full: must be reject or pause
//
// Each problem is a [*Problem] that also knows the layer that set its key;
// [Explain] writes them for people, with the file or variable at fault.
// [Effective] shows the configuration in force with every key's source,
// [DefaultFile] the annotated defaults.
//
// # Relative paths
//
// A relative file path in a file (a plugin's path, key, token and CA files,
// a key's file: URL, and strategy parameters named config, file or path or
// ending in _file, _path or _dir) resolves against that file's directory.
// Paths from the environment and flags are left relative to the working
// directory.
//
// # Environment
//
// A variable names a key path after the SLUICE_ prefix, lower-cased, with a
// double underscore between keys so that the single underscores of
// snake_case keys survive (see [EnvKey]):
//
//	SLUICE_MEMORY__PRODUCER_LIMIT=0      memory.producer_limit: 0
//	SLUICE_BROKER__URL=pulsar://pulsar:6650
//	SLUICE_WEBSOCKET__IDLE_TIMEOUT=1m
//	SLUICE_PLUGINS='[{name: tiers, path: ./bin/tiers}]'
//
// Values are typed by the schema: booleans and numbers are parsed, sizes and
// durations are read as in YAML, and lists and mappings are YAML flow values.
// Every SLUICE_ variable must name a key: one that does not is an unknown
// setting, an error naming the variable. Keys inside lists (a single route)
// cannot be set one by one. Variables that share the prefix but are not for
// Sluice are listed in [EnvIgnore] (SLUICE_ENV_IGNORE=SLUICE_URL,SLUICE_APP_*)
// and left alone, as is the plugin handshake's variable.
//
// # Sizes, durations and absent keys
//
// Sizes are [Size] values: "64MiB", "16MB", "1KiB" or a plain number of
// bytes, by the grammar strategy parameters use too. Durations are Go durations ("30s", "5m"); a bare number other than
// 0 is refused. A key that is absent (or null) takes its default; for most
// keys an explicit zero means the same, but not for the memory limits (0 is
// unbounded, and Load records that it was set: see [Memory] and
// [Config.Warnings]), websocket.idle_timeout (0 disables it) and
// broker.embedded.allow_auto_topic_creation, broker.embedded.in_process and
// broker.embedded.delete_inactive_topics (false disables them).
//
// # Static and dynamic configuration
//
// Routes are dynamic: [Watch] polls the files and hands each new, validated
// configuration to the caller, which builds a new route table off to the
// side and swaps it in (see the route package); a bad file yields its error
// and the caller keeps the old table. Everything else is static: a change
// needs a restart, and [StaticChanges] lists what changed.
//
// Strategy parameters stay raw (map[string]any) in [StrategyRef]; a
// strategy's factory decodes them with [DecodeStrict], as strictly as Load.
package config
