// Loads a checkpoint in the published layout (engine/weights/tensor_layout.h) into the fp32
// reference weights: BF16/F16/F32 widened, MXFP4 routed experts dequantised (OCP MX v1.0), A_log
// sliced to one value per head. Every missing, unexpected or misshaped tensor is reported at once.
#pragma once

#include "core/model_config.h"
#include "engine/reference/model.h"
#include "engine/weights/checkpoint.h"

#include <string>

namespace k3::ref {

ModelWeights load_model_weights(const ModelConfig& config, const weights::Checkpoint& checkpoint);

// A checkpoint directory with its config.json: the config and the model, ready to run.
struct LoadedModel {
  ModelConfig config;
  ReferenceModel model;
};
LoadedModel load_reference_model(const std::string& checkpoint_dir);

}  // namespace k3::ref
