//go:build !race

package wsapi

const raceEnabled = false
