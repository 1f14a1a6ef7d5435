module github.com/asmp-dev/asmp

go 1.26.8
