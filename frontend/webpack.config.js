// Merged by @jupyterlab/builder into its webpack config (package.json "jupyterlab.webpackConfig").
// Module ids are named after paths relative to this folder: webpack's default ("deterministic")
// hashes the federation container's absolute path, so a build in another folder would differ
// from the one shipped in bettong_nb/notebook/labextension and CI could not compare the two.
module.exports = {
  optimization: { moduleIds: 'named' }
};
