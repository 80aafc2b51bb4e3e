//go:build race

package wswatch_test

const raceEnabled = true
