//go:build !windows

package hns

// featureRanges is the version table FeaturesFor uses: off Windows,
// hnslib's hcn does not build, so it is the mirror of hnslib's table.
var featureRanges = mirrorRanges
