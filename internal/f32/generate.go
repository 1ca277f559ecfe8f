package f32

//go:generate go run gen.go
