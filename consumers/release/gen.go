package release

//go:generate go run ./internal/gencolumns

// columnDoc is the documentation of one Parquet column.
type columnDoc struct {
	Path string
	Doc  string
}
