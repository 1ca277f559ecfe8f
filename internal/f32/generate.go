package f32

//go:generate go run gen.go gen_vector.go gen_q8.go
