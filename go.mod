module github.com/conditionhq/condition

go 1.26.0

require (
	github.com/disintegration/imaging v1.6.2
	github.com/spf13/pflag v1.1.0
	github.com/yalue/onnxruntime_go v1.27.0
	golang.org/x/image v0.48.0
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.44.0
	gonum.org/v1/gonum v0.17.0
	google.golang.org/protobuf v1.36.12
)
