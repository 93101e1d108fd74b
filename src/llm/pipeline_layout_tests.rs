use super::*;

#[test]
fn deepseek_v3_pp8_vp4_layout_by_hand() {
    // Megatron-Bridge deepseek.py layout_map, pp 8 · vp 4: "Et|(tt|)*30mL" → "Et" | 30 × "tt" | "mL" = 32 virtual
    // stages; t count 1 + 30·2 = 61 (DeepSeek-V3's layers), one m.
    let l = validate_layout("Et|(tt|)*30mL", 8, 4, 61, 1).unwrap();
    assert_eq!(l.chunks.len(), 32);
    // Virtual stage 0 = chunk 0 of stage 0 (index 0): E + 1 layer.
    assert_eq!(l.chunk(0, 0), ChunkLayout { layers: 1, mtp: 0, embedding: true, loss: false });
    // Virtual stage 31 = 31 / 8 = chunk 3 of stage 31 mod 8 = 7 (index 7·4 + 3 = 31): MTP + loss, no layer.
    assert_eq!(l.chunk(7, 3), ChunkLayout { layers: 0, mtp: 1, embedding: false, loss: true });
    // Virtual stages 1–30 hold 2 layers each: e.g. virtual stage 9 = chunk 1 of stage 1, virtual stage 30 = chunk 3
    // of stage 6.
    assert_eq!(l.chunk(1, 1).layers, 2);
    assert_eq!(l.chunk(6, 3).layers, 2);
    let layers = l.layers();
    assert_eq!(layers.iter().sum::<u32>(), 61);
    assert_eq!(layers.iter().filter(|&&n| n == 2).count(), 30);
    // Stage 0 holds virtual stages 0, 8, 16, 24: 1 + 2 + 2 + 2 = 7 layers; stage 7 holds 7, 15, 23, 31: 2+2+2+0 = 6;
    // the others 8. MTP on stage 7 only.
    let per_stage: Vec<u32> = layers.chunks(4).map(|c| c.iter().sum()).collect();
    assert_eq!(per_stage, vec![7, 8, 8, 8, 8, 8, 8, 6]);
    assert_eq!((l.stage_mtp(7), l.stage_mtp(6)), (1, 0));
}

#[test]
fn megatron_docs_pp16_vp2_layout_puts_mtp_on_stage_14() {
    // Megatron-Core docs "Custom Pipeline Model Parallel Layout": "Et*3|(tt|)*29,m|L" on pp 16 → 1 + 29 + 2 = 32
    // virtual stages, vp 2; layers 3 + 58 = 61. Virtual stage 30 (m) is chunk 30 / 16 = 1 of stage 30 mod 16 = 14,
    // virtual stage 31 (L) chunk 1 of stage 15; the docs' table: "PP rank 14: decoder*2 | mtp", "15: decoder*2 | loss".
    let l = validate_layout("Et*3|(tt|)*29,m|L", 16, 2, 61, 1).unwrap();
    assert_eq!(l.chunk(0, 0), ChunkLayout { layers: 3, mtp: 0, embedding: true, loss: false });
    assert_eq!(l.chunk(14, 1), ChunkLayout { layers: 0, mtp: 1, embedding: false, loss: false });
    assert_eq!(l.chunk(15, 1), ChunkLayout { layers: 0, mtp: 0, embedding: false, loss: true });
    assert_eq!((l.chunk(14, 0).layers, l.chunk(15, 0).layers), (2, 2));
    // pp 8 · vp 2: "Et*4|(t*4|)*14tmL" → 4 + 14·4 + 1 = 61 layers over 16 virtual stages.
    let l = validate_layout("Et*4|(t*4|)*14tmL", 8, 2, 61, 1).unwrap();
    assert_eq!(l.chunk(7, 1), ChunkLayout { layers: 1, mtp: 1, embedding: false, loss: true });
    assert_eq!(l.layers().iter().sum::<u32>(), 61);
}

#[test]
fn megatron_rules_refuse_with_the_field() {
    let err = |s: &str, pp, v, layers, mtp| validate_layout(s, pp, v, layers, mtp).unwrap_err();
    // The layout's 1 + 30·2 = 61 layers for a model of 60.
    let e = err("Et|(tt|)*30mL", 8, 4, 60, 1);
    assert_eq!(e.field, FIELD);
    assert!(e.message.contains("61 transformer layers t, but the model has 60"), "{}", e.message);
    // 32 virtual stages on pp 8 are 4 chunks, not virtual_stages 2; 31 are not divisible by pp 8.
    assert!(err("Et|(tt|)*30mL", 8, 2, 61, 1).message.contains("virtual_stages is 2"));
    assert!(err("Et|(tt|)*29mL", 8, 4, 59, 1).message.contains("not divisible by pp 8"));
    // No E first / no L last / E twice / MTP count / a t after m / m in a stage's first chunk / an unknown char.
    assert_eq!(err("tE|L", 2, 1, 1, 0).field, FIELD);
    assert_eq!(err("Et|Lt", 2, 1, 2, 0).field, FIELD);
    assert_eq!(err("EtE|tL", 2, 1, 2, 0).field, FIELD);
    assert!(err("Et|tL", 2, 1, 2, 1).message.contains("mtp_layers 1"));
    assert!(err("Et|mtL", 2, 1, 2, 1).message.contains("before the MTP"));
    // pp 2 · vp 2: "Et|tm||L" puts m in virtual stage 1 = chunk 0 of stage 1 → refused (a stage's last chunk only;
    // virtual stages 2 and 3 are the last chunks).
    assert!(err("Et|tm||L", 2, 2, 2, 1).message.contains("last chunk"));
    assert!(err("Et|xL", 2, 1, 1, 0).message.contains("invalid layer character"));
    assert!(err("Et|t*99999999999999999999L", 2, 1, 1, 0).message.contains("unrolls"));
}

#[test]
fn grammar_matches_megatrons_regular_expressions() {
    // parse_str_to_list's own examples: "xy(ab|cd|ef)*2,pq" unrolls the group; "(|ab)*2,cd" → "|ab|abcd".
    let s = parse_layout("E(|tt)*2,mL").unwrap(); // "E|tt|ttmL"
    assert_eq!(s.len(), 3);
    assert_eq!((s[0].embedding, s[1].layers, s[2].layers, s[2].mtp, s[2].loss), (true, 2, 2, 1, true));
    // x*N repeats any character, "|" included: "Et|*2tL" → "Et||tL", three stages, the middle one empty.
    let s = parse_layout("Et|*2tL").unwrap();
    assert_eq!(s.iter().map(|c| c.layers).collect::<Vec<_>>(), vec![1, 0, 1]);
    // Groups are unrolled before characters: "(t*2)*3" → "t*2t*2t*2" → 6 layers.
    assert_eq!(parse_layout("E(t*2)*3L").unwrap()[0].layers, 6);
    // A group count of 0 removes the group, as re.sub does with "ab" * 0.
    assert_eq!(parse_layout("Et(t)*0L").unwrap()[0].layers, 1);
}

#[test]
fn random_strings_never_panic() {
    // A few hundred random strings over the grammar's characters and some others: each parses or is refused with
    // the field, never a panic.
    let alphabet: Vec<char> = "Etm L|()*0123456789,x\n(".chars().collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..500 {
        let len = (next() % 40) as usize;
        let s: String = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
        let pp = (next() % 8 + 1) as u32;
        let v = (next() % 4 + 1) as u32;
        if let Err(e) = validate_layout(&s, pp, v, (next() % 8) as u32, (next() % 2) as u32) {
            assert_eq!(e.field, FIELD, "{s:?}");
        }
    }
}

#[test]
fn the_layout_is_not_taken_with_megatrons_other_split_options() {
    let model: ModelSpec = serde_json::from_value(serde_json::json!({"layers": 2, "hidden": 64, "heads": 4,
        "seq_len": 32, "vocab": 100}))
    .unwrap();
    let par = |extra: serde_json::Value| -> ParallelSpec {
        let mut p = serde_json::json!({"pp": 2, "pipeline_model_parallel_layout": "Et|tL"});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        serde_json::from_value(p).unwrap()
    };
    // "Et|tL" on pp 2: 1 + 1 = 2 layers, one chunk per stage.
    let l = request_layout(&model, &par(serde_json::json!({}))).unwrap().unwrap();
    assert_eq!(l.layers(), vec![1, 1]);
    for extra in [
        serde_json::json!({"layer_split": "s1"}),
        serde_json::json!({"account_for_loss_in_pipeline_split": true}),
        serde_json::json!({"num_layers_in_last_pipeline_stage": 1}),
    ] {
        assert_eq!(request_layout(&model, &par(extra.clone())).unwrap_err().field, FIELD, "{extra}");
    }
    let none: ParallelSpec = serde_json::from_value(serde_json::json!({"pp": 2})).unwrap();
    assert_eq!(request_layout(&model, &none).unwrap(), None);
}
