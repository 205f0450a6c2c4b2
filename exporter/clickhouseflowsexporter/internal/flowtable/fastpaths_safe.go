//go:build flowtel_safe

package flowtable

// driverFastPath is off in the flowtel_safe build: the driver's public
// Append alone (see fastpaths.go).
const driverFastPath = false
