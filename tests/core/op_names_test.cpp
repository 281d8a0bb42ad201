// The op table (core/op_names.h): names are the committed ones and parse back.
#include "core/op_names.h"

#include <gtest/gtest.h>

#include <set>

namespace k3 {
namespace {

TEST(OpNames, NamesAsCommitted) {
  EXPECT_EQ(op_name(OpId::mla_attn_decode, 3), "L004.mla.attn_decode");
  EXPECT_EQ(op_name(OpId::kda_recurrent, 0), "L001.kda.recurrent");
  EXPECT_EQ(op_name(OpId::embed_lookup, -1), "embed.lookup");
  EXPECT_EQ(op_name(OpId::head_lm_head, 7), "head.lm_head");  // the layer is ignored outside layers
  EXPECT_EQ(op_name(OpId::decode_advance, -1), "decode.advance");
  EXPECT_EQ(op_module(OpId::moe_experts), "moe");
  EXPECT_EQ(op_module(OpId::head_norm), "head");
}

TEST(OpNames, EveryNameIsUniqueAndParsesBack) {
  std::set<std::string> seen;
  for (int i = 0; i < kOpIdCount; ++i) {
    const OpId id = static_cast<OpId>(i);
    const int layer = op_info(id).scope == OpScope::layer ? 41 : -1;
    const std::string name = op_name(id, layer);
    EXPECT_TRUE(seen.insert(name).second) << name;
    const std::optional<OpRef> back = parse_op_name(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(back->id, id) << name;
    EXPECT_EQ(back->layer, layer) << name;
    if (const std::optional<OpId> host = op_info(id).attnres_host) {
      EXPECT_EQ(op_info(*host).kind, OpKind::attnres_mix) << name;
      EXPECT_EQ(op_info(*host).scope, op_info(id).scope) << name;
    }
  }
  for (const char* bad : {"L000.mla.attn_decode", "L004.mla.attn", "mla.attn_decode", "head.lookup", "Lx04.kda.chunk",
                          "embed.lookup.x", ""}) {
    EXPECT_FALSE(parse_op_name(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_op_kind("kda_chunk"), OpKind::kda_chunk);
  EXPECT_FALSE(parse_op_kind("kda chunk").has_value());
}

}  // namespace
}  // namespace k3
