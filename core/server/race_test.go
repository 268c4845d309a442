//go:build race

package server_test

// raceEnabled: the race detector inflates heap and stack figures.
const raceEnabled = true
