module github.com/conditionhq/condition

go 1.26.0

require (
	github.com/disintegration/imaging v1.6.2 // indirect
	github.com/spf13/pflag v1.1.0 // indirect
	github.com/yalue/onnxruntime_go v1.27.0 // indirect
	golang.org/x/image v0.48.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
