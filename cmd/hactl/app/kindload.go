package app

// kindClusterUsage is --kind-cluster's help, the same on every deploy command.
const kindClusterUsage = "with --kubeconfig and --image-archive: load the archive into this kind cluster's nodes (kind load image-archive, kind from PATH) once its nodes are the kubeconfig's and each can run the image"
