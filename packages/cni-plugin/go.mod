module allocnet.dev/cni-plugin

go 1.19
